#pragma once

// The GPU's offload tiers (CUDA builds only; no CUDA types here): every routed expert in pinned
// host memory in the device layout (the slow tier) and device buffers of one expert each (the fast
// tier). Copies run on a copy stream of their own, in the order they are submitted; the compute
// stream waits for a copy on the device (an event), and a copy into a buffer waits for the
// computation that last read it (another event), so the host never blocks on a copy.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/offload/expert_tier.h"
#include "executor/weights.h"

namespace moelab::executor::gpu {

class GpuExpertTier final : public offload::ExpertTier {
 public:
  // Copies the routed experts of `weights` (bf16) into pinned host memory: gate_up [2 width][ld]
  // then down [hidden][ld'], rows padded to 8 elements (the layout the GEMMs read).
  GpuExpertTier(const ModelWeights& weights, int device, void* compute_stream);
  ~GpuExpertTier() override;
  GpuExpertTier(const GpuExpertTier&) = delete;
  GpuExpertTier& operator=(const GpuExpertTier&) = delete;

  int64_t expert_bytes() const override { return expert_elements_ * 2; }
  int32_t AddBuffer() override;
  int64_t Submit(const Copy& copy) override;
  void Wait(int64_t copy) override;
  bool Done(int64_t copy) override;
  void Finish(int64_t copy) override;
  void Released(int32_t buffer) override;
  const FfnWeights* HostWeights(int32_t /*buffer*/) const override { return nullptr; }
  double stall_s() const override { return stall_s_; }
  void PassEnded() override;
  double bytes_per_copy() const override { return static_cast<double>(expert_bytes()); }
  bool has_host_compute() const override { return true; }
  std::string slow_tier_path() const override { return "pinned host memory"; }
  bool direct_io() const override { return false; }
  std::string warning() const override { return ""; }

  // The expert in `buffer` on the device: gate_up rows, then down rows at DownOffset().
  const uint16_t* DeviceBuffer(int32_t buffer) const {
    return buffers_[static_cast<size_t>(buffer)];
  }
  // The expert's host copy (for measuring a copy).
  const uint16_t* HostExpert(int32_t layer, int32_t expert) const {
    return host_ + (static_cast<int64_t>(layer) * experts_ + expert) * expert_elements_;
  }
  int64_t DownOffset() const { return down_offset_; }
  // Median seconds of `repeats` copies of one expert into `device_buffer` on the copy stream.
  double MeasureCopySeconds(uint16_t* device_buffer, int repeats);

 private:
  struct Pending {
    void* start = nullptr;  // cudaEvent_t pair around the compute stream's wait
    void* end = nullptr;
  };
  void* NewEvent();

  int device_;
  void* compute_stream_;
  void* copy_stream_ = nullptr;
  int64_t experts_ = 0;
  int64_t expert_elements_ = 0;
  int64_t down_offset_ = 0;
  uint16_t* host_ = nullptr;  // pinned, [moe layer][expert][expert_elements_]
  std::vector<uint16_t*> buffers_;
  std::vector<void*> filled_;         // [buffer]: recorded after its latest copy
  std::vector<void*> released_;       // [buffer]: recorded after the computation that last read it
  std::vector<int32_t> copy_buffer_;  // [copy id]
  std::vector<int64_t> buffer_copy_;  // [buffer]: its latest copy id
  std::vector<Pending> waits_;        // this pass's waits on the compute stream
  std::vector<void*> event_pool_;
  double stall_s_ = 0;
};

}  // namespace moelab::executor::gpu
