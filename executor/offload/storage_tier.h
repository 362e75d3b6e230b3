#pragma once

#include <memory>
#include <vector>

#include "executor/offload/expert_reader.h"
#include "executor/offload/expert_store.h"
#include "executor/offload/expert_tier.h"

namespace moelab::executor::offload {

// The CPU-only machine's tiers: the expert store on storage (O_DIRECT reads by the expert reader,
// threads or io_uring) and RAM buffers in the kernels' layout.
class StorageTier final : public ExpertTier {
 public:
  StorageTier(const ExecutorConfig& config, const ExpertStore& store, ReaderKind reader,
              int reads_in_flight, ExecutionTimeline* timeline = nullptr);
  ~StorageTier() override;  // reads still queued finish into their buffers first

  int64_t expert_bytes() const override { return store_.key().payload_bytes(); }
  int32_t AddBuffer() override;
  int64_t Submit(const Copy& copy) override;
  void Wait(int64_t copy) override;
  bool Done(int64_t copy) override { return reader_->Done(copy); }
  void Finish(int64_t copy) override { reader_->Wait(copy); }
  void Released(int32_t /*buffer*/) override {}
  const FfnWeights* HostWeights(int32_t buffer) const override {
    return buffers_[static_cast<size_t>(buffer)].get();
  }
  double stall_s() const override { return stall_s_; }
  double bytes_per_copy() const override { return static_cast<double>(store_.key().block_bytes()); }
  std::optional<CopyTiming> copy_timing() const override {
    return CopyTiming{reader_->busy_s(), reader_->reads(), reader_->spans()};
  }
  bool has_host_compute() const override { return false; }
  std::string slow_tier_path() const override { return store_.data_path().string(); }
  bool direct_io() const override { return store_.direct_io(); }
  std::string warning() const override { return store_.warning(); }

 private:
  ExecutorConfig config_;
  const ExpertStore& store_;
  std::vector<std::unique_ptr<FfnWeights>> buffers_;
  std::unique_ptr<ExpertReader> reader_;
  double stall_s_ = 0;
};

}  // namespace moelab::executor::offload
