// GPU families through device/cuda_profile.h: expert_ffn on "cuda:N" (cuBLAS bf16 GEMMs, weights
// cycled past 2x the device's L2) and the four host<->device copies (pinned and pageable). All
// manual timing: the session returns each call's seconds.
#include <algorithm>
#include <memory>

#include "device/cuda_profile.h"
#include "base/error.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

int DeviceIndex(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0)
    throw base::Error("GPU bench: device '" + device + "' is not cuda:<index>");
  return std::stoi(device.substr(5));
}

class GpuBench : public OperatorBench {
 public:
  GpuBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : family_(points.front().family) {
    const GridPoint& first = points.front();
    const int device = DeviceIndex(first.device);
    if (family_ == OperatorFamily::kExpertFfn) {
      const executor::ExecutorConfig& c = *env.target;
      int64_t max_tokens = 1;
      for (const GridPoint& p : points) max_tokens = std::max(max_tokens, p.tokens);
      session_ = std::make_unique<device::GpuProfileSession>(device, kGpuAlignment);
      const int64_t block_bytes = ExpertBytes(c);
      const int64_t wanted = CyclingBlocks(block_bytes, session_->l2_bytes());
      const int64_t blocks =
          session_->PrepareExpertFfn(c.hidden_size, c.expert_intermediate_size, max_tokens, wanted);
      notes_.push_back("expert_ffn " + first.device + " (" + session_->device_name() +
                       "): cublasGemmEx bf16 in/out, fp32 compute, gate_up then SiLU*up then down; "
                       "weights cycled over " +
                       std::to_string(blocks) + " blocks of " + std::to_string(block_bytes) +
                       " bytes (L2 " + std::to_string(session_->l2_bytes()) +
                       " bytes); CUDA event timing");
      if (blocks < wanted) {
        notes_.push_back("expert_ffn " + first.device + ": only " + std::to_string(blocks) +
                         " of " + std::to_string(wanted) + " weight blocks fit the device memory");
      }
      return;
    }
    int64_t max_bytes = 1;
    for (const GridPoint& p : points) max_bytes = std::max(max_bytes, p.bytes);
    session_ = std::make_unique<device::GpuProfileSession>(device, max_bytes);
    notes_.push_back(ToString(family_) + " " + first.device +
                     ": cudaMemcpyAsync + cudaStreamSynchronize, host wall time");
  }

  bool manual_time() const override { return true; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      for (auto _ : state) state.SetIterationTime(Once(point));
    });
  }

 private:
  static constexpr int64_t kGpuAlignment = 4096;

  double Once(const GridPoint& point) {
    switch (family_) {
      case OperatorFamily::kExpertFfn:
        return session_->ExpertFfn(point.tokens);
      case OperatorFamily::kMemcpyH2dPinned:
        return session_->CopyHostToDevice(point.bytes, true);
      case OperatorFamily::kMemcpyH2dPageable:
        return session_->CopyHostToDevice(point.bytes, false);
      case OperatorFamily::kMemcpyD2hPinned:
        return session_->CopyDeviceToHost(point.bytes, true);
      case OperatorFamily::kMemcpyD2hPageable:
        return session_->CopyDeviceToHost(point.bytes, false);
      default:
        throw base::Error("GPU bench: " + ToString(family_) + " has no GPU implementation");
    }
  }

  OperatorFamily family_;
  std::unique_ptr<device::GpuProfileSession> session_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeGpuBench(const std::vector<GridPoint>& points,
                                            const BenchEnvironment& env) {
  const OperatorFamily family = points.front().family;
  if (family != OperatorFamily::kExpertFfn && !IsGpuOnly(family)) {
    throw base::Error("GPU bench: " + ToString(family) + " has no GPU implementation");
  }
  return std::make_unique<GpuBench>(points, env);
}

}  // namespace moelab::profiler::impl
