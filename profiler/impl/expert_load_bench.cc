// expert_load: the offload reader's work on a block it has read (executor/offload/checksum.h's
// VerifiedCopy: checksum, then copy into the expert's weight buffers), on one thread, as each of
// the executor's reader threads does it. The source is one reused read buffer, as a reader
// thread's; the destinations walk a region larger than 2 x the cache, as the expert cache's
// buffers do. On a CPU-only machine this is the storage tier's "link"
// (fit/storage_tier_hardware.h), and it runs on the cores the computation uses.
#include <algorithm>
#include <cstring>
#include <span>

#include "base/error.h"
#include "executor/offload/checksum.h"
#include "executor/offload/expert_store.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class ExpertLoadBench : public OperatorBench {
 public:
  ExpertLoadBench(const std::vector<GridPoint>& points, const BenchEnvironment& env) {
    int64_t largest = 1;
    for (const GridPoint& p : points) {
      largest = std::max(largest, p.bytes);
      region_bytes_ = std::max(region_bytes_, CyclingBlocks(p.bytes, env.cache_bytes) * p.bytes);
    }
    RequireMemory(static_cast<double>(region_bytes_ + largest), "expert_load destinations");
    source_ = executor::offload::AlignedBuffer(largest);
    destination_ = executor::offload::AlignedBuffer(region_bytes_);
    for (int64_t i = 0; i < largest; ++i) source_.data()[i] = static_cast<std::byte>(i * 31 + 7);
    std::memset(destination_.data(), 0, static_cast<size_t>(region_bytes_));
    notes_.push_back(
        "expert_load cpu: the offload reader's checksum and copy of a read block on one thread; "
        "destinations walk " +
        std::to_string(region_bytes_) + " bytes (> 2 x the cache of " +
        std::to_string(env.cache_bytes) + " bytes), so they are in DRAM");
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const std::span<const std::byte> payload(source_.data(), static_cast<size_t>(point.bytes));
      const uint64_t checksum = executor::offload::Checksum64(payload);
      const size_t first = static_cast<size_t>(point.bytes / 2);  // gate/up, then down
      const int64_t slots = std::max<int64_t>(1, region_bytes_ / point.bytes);
      int64_t slot = 0;
      for (auto _ : state) {
        std::byte* destination = destination_.data() + slot * point.bytes;
        if (!executor::offload::VerifiedCopy(
                payload, checksum, {destination, first},
                {destination + first, static_cast<size_t>(point.bytes) - first})) {
          throw base::Error("expert_load: the checksum of an unchanged block differs (a bug)");
        }
        benchmark::ClobberMemory();
        slot = (slot + 1) % slots;
      }
    });
  }

 private:
  int64_t region_bytes_ = 0;
  executor::offload::AlignedBuffer source_, destination_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeExpertLoadBench(const std::vector<GridPoint>& points,
                                                   const BenchEnvironment& env) {
  return std::make_unique<ExpertLoadBench>(points, env);
}

}  // namespace moelab::profiler::impl
