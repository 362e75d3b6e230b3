// memcpy_host: std::memcpy of a block on one thread (as an offloading engine copies one expert),
// source and destination walking through regions larger than 2 x the cache so both come from DRAM.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<unsigned char, FreeDeleter>;

AlignedBuffer AllocateAligned(int64_t bytes) {
  void* p = std::aligned_alloc(4096, static_cast<size_t>((bytes + 4095) / 4096 * 4096));
  if (p == nullptr)
    throw base::Error("memcpy_host: cannot allocate " + std::to_string(bytes) + " bytes");
  return AlignedBuffer(static_cast<unsigned char*>(p));
}

class HostCopyBench : public OperatorBench {
 public:
  HostCopyBench(const std::vector<GridPoint>& points, const BenchEnvironment& env) {
    for (const GridPoint& p : points)
      region_bytes_ = std::max(region_bytes_, CyclingBlocks(p.bytes, env.cache_bytes) * p.bytes);
    RequireMemory(2.0 * static_cast<double>(region_bytes_), "memcpy_host source and destination");
    source_ = AllocateAligned(region_bytes_);
    destination_ = AllocateAligned(region_bytes_);
    // Every page written, so neither region is the kernel's shared zero page; a copy's speed does
    // not depend on the bytes (a byte-by-byte pattern took seconds per round under ASan).
    std::memset(source_.get(), 0x5a, static_cast<size_t>(region_bytes_));
    std::memset(destination_.get(), 0, static_cast<size_t>(region_bytes_));
    notes_.push_back(
        "memcpy_host cpu: std::memcpy on one thread; source and destination each walk " +
        std::to_string(region_bytes_) + " bytes (> 2 x the cache of " +
        std::to_string(env.cache_bytes) + " bytes), so both are in DRAM");
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const int64_t slots = std::max<int64_t>(1, region_bytes_ / point.bytes);
      int64_t slot = 0;
      for (auto _ : state) {
        const int64_t offset = slot * point.bytes;
        std::memcpy(destination_.get() + offset, source_.get() + offset,
                    static_cast<size_t>(point.bytes));
        benchmark::ClobberMemory();
        slot = (slot + 1) % slots;
      }
    });
  }

 private:
  int64_t region_bytes_ = 0;
  AlignedBuffer source_, destination_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeHostCopyBench(const std::vector<GridPoint>& points,
                                                 const BenchEnvironment& env) {
  return std::make_unique<HostCopyBench>(points, env);
}

}  // namespace moelab::profiler::impl
