// The four host<->device copies on "cuda:N" (pinned and pageable, both directions) through
// device/cuda_profile.h: host wall time around cudaMemcpyAsync and cudaStreamSynchronize, what a
// caller waiting for the copy sees (manual timing: the session returns each call's seconds).
#include <algorithm>
#include <memory>

#include "base/error.h"
#include "device/cuda_profile.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class GpuCopyBench : public OperatorBench {
 public:
  GpuCopyBench(const std::vector<GridPoint>& points, const BenchEnvironment& /*env*/)
      : family_(points.front().family) {
    int64_t max_bytes = 1;
    for (const GridPoint& p : points) max_bytes = std::max(max_bytes, p.bytes);
    session_ =
        std::make_unique<device::GpuProfileSession>(GpuIndex(points.front().device), max_bytes);
    notes_.push_back(ToString(family_) + " " + points.front().device +
                     ": cudaMemcpyAsync + cudaStreamSynchronize, host wall time");
  }

  bool manual_time() const override { return true; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      for (auto _ : state) state.SetIterationTime(Once(point));
    });
  }

 private:
  double Once(const GridPoint& point) {
    switch (family_) {
      case OperatorFamily::kMemcpyH2dPinned:
        return session_->CopyHostToDevice(point.bytes, true);
      case OperatorFamily::kMemcpyH2dPageable:
        return session_->CopyHostToDevice(point.bytes, false);
      case OperatorFamily::kMemcpyD2hPinned:
        return session_->CopyDeviceToHost(point.bytes, true);
      case OperatorFamily::kMemcpyD2hPageable:
        return session_->CopyDeviceToHost(point.bytes, false);
      default:
        throw base::Error("GPU copy bench: " + ToString(family_) + " is not a copy");
    }
  }

  OperatorFamily family_;
  std::unique_ptr<device::GpuProfileSession> session_;
};

}  // namespace

int GpuIndex(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5 ||
      device.find_first_not_of("0123456789", 5) != std::string::npos)
    throw base::Error("GPU bench: device '" + device + "' is not cuda:<index>");
  return std::stoi(device.substr(5));
}

std::unique_ptr<OperatorBench> MakeGpuCopyBench(const std::vector<GridPoint>& points,
                                                const BenchEnvironment& env) {
  if (!IsGpuOnly(points.front().family)) {
    throw base::Error("GPU copy bench: " + ToString(points.front().family) + " is not a copy");
  }
  return std::make_unique<GpuCopyBench>(points, env);
}

}  // namespace moelab::profiler::impl
