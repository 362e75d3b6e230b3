#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <span>
#include <vector>

#include "executor/executor_config.h"
#include "kernels/thread_pool.h"
#include "profiler/profile_grid.h"

// The extension point of the profiler: one OperatorBench per operator family and device, the
// variants in profiler/impl/ (one per file), chosen by MakeOperatorBench.

namespace moelab::profiler {

// What every bench may use. Pointers are non-owning and outlive the bench.
struct BenchEnvironment {
  const executor::ExecutorConfig* target = nullptr;
  const executor::ExecutorConfig* draft = nullptr;
  kernels::ThreadPool* pool = nullptr;
  // The last-level cache the weight-cycling rule and the cache evictor work against
  // (EffectiveCacheBytes of the reported L3).
  int64_t cache_bytes = 0;
  const GridSpec* spec = nullptr;
  std::filesystem::path storage_dir;  // where storage_read writes its temporary file
  bool storage_direct_io = true;      // false: buffered reads, as when O_DIRECT is refused
  uint64_t seed = 1;
};

class OperatorBench {
 public:
  virtual ~OperatorBench() = default;

  // True: Run sets each iteration's time (State::SetIterationTime, registered with
  // UseManualTime); false: Google Benchmark's wall time of the loop (UseRealTime).
  virtual bool manual_time() const = 0;
  // Seconds per reported sample = Google Benchmark's seconds per iteration x this.
  virtual double time_scale() const { return 1.0; }
  // Iterations per repetition for `point`, or 0 to let Google Benchmark grow them to the minimum
  // time. Benches that flush the caches before every pass fix it (FlushedIterations): a flush
  // reads 2 x the cache (16 ms here), so growing a 30 us pass to 50 ms would flush for minutes.
  virtual int64_t Iterations(const GridPoint& /*point*/) { return 0; }
  // Runs the benchmark loop for `point` (one of the points the bench was made for). Never throws:
  // a failure ends the benchmark with State::SkipWithError.
  virtual void Run(benchmark::State& state, const GridPoint& point) = 0;
  // Adds family-specific fields to a sample (storage_read: "direct_io").
  virtual void Annotate(const GridPoint& /*point*/, nlohmann::json& /*sample*/) const {}

  // One line per fact a reader of the profile needs (how weights were cycled, fallbacks taken).
  const std::vector<std::string>& notes() const { return notes_; }

 protected:
  std::vector<std::string> notes_;
};

// The bench for `points` (all of one family on one device), with every buffer, file, KV cache and
// device allocation the largest point needs made here, outside any timing. Throws moelab::Error
// (not enough memory, a file that cannot be written) or GpuError (CUDA).
std::unique_ptr<OperatorBench> MakeOperatorBench(const std::vector<GridPoint>& points,
                                                 const BenchEnvironment& env);

// Runs `body`; an exception ends the benchmark with SkipWithError(what()) instead of escaping
// into Google Benchmark.
template <typename Body>
void RunGuarded(benchmark::State& state, Body&& body) {
  try {
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// Refuses (moelab::Error naming `what` and both sizes) to allocate more than 80% of the memory the
// kernel reports available.
void RequireMemory(double bytes, const std::string& what);

// Iterations of a flushed pass that reach `min_time_s` of measured time, from one pass's time,
// at most kMaxFlushedIterations (each pass is cold and alike, so a few samples are enough).
constexpr int64_t kMaxFlushedIterations = 10;
int64_t FlushedIterations(double min_time_s, double pass_s);

// Every cache line of `bytes` written back and dropped from every cache level (clflush), untimed
// before a measured pass: the operands a real step finds in DRAM go cold while the activations it
// has just written stay cached (the attention benches). Error on a CPU without clflush (not
// x86-64).
void FlushFromCaches(std::span<const std::byte> bytes);

// A buffer of 2 x the cache (at least 1 MiB) that EvictCaches reads on every thread of the pool,
// untimed before a measured pass, so the pass's weights come from DRAM as they do in a real step.
class CacheEvictor {
 public:
  explicit CacheEvictor(int64_t cache_bytes);
  static int64_t BytesFor(int64_t cache_bytes) {
    return std::max<int64_t>(2 * cache_bytes, int64_t{1} << 20);
  }
  void EvictCaches(kernels::ThreadPool& pool) const;
  int64_t bytes() const { return static_cast<int64_t>(buffer_.size() * sizeof(int64_t)); }

 private:
  std::vector<int64_t> buffer_;
};

}  // namespace moelab::profiler
