#include "profiler/operator_bench.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/bf16.h"
#include "base/error.h"
#include "profiler/impl/benches.h"
#include "profiler/machine_info.h"

namespace moelab::profiler {

void RequireMemory(double bytes, const std::string& what) {
  const double available = AvailableMemoryBytes();
  if (bytes > 0.8 * available) {
    throw base::Error(what + " needs " + std::to_string(static_cast<int64_t>(bytes)) +
                      " bytes but only " + std::to_string(static_cast<int64_t>(available)) +
                      " are available (80% may be used)");
  }
}

std::unique_ptr<OperatorBench> MakeOperatorBench(const std::vector<GridPoint>& points,
                                                 const BenchEnvironment& env) {
  if (points.empty()) throw base::Error("operator bench: no points");
  const GridPoint& first = points.front();
  for (const GridPoint& p : points) {
    if (p.family != first.family || p.device != first.device) {
      throw base::Error("operator bench: points of " + first.Label() + " and " + p.Label() +
                        " mixed");
    }
  }
  if (first.device != "cpu") {
    return IsGpuOnly(first.family) ? impl::MakeGpuCopyBench(points, env)
                                   : impl::MakeGpuPassBench(points, env);
  }
  switch (first.family) {
    case OperatorFamily::kExpertFfn:
    case OperatorFamily::kDenseFfn:
    case OperatorFamily::kExpertFfnWorkingSet:
      return impl::MakeFfnBench(points, env);
    case OperatorFamily::kRouter:
    case OperatorFamily::kLmHead:
      return impl::MakeMatmulBench(points, env);
    case OperatorFamily::kAttentionDecode:
    case OperatorFamily::kAttentionPrefill:
    case OperatorFamily::kAttentionVerify:
      return impl::MakeAttentionBench(points, env);
    case OperatorFamily::kDraftDecode:
    case OperatorFamily::kDraftDecodeWarm:
      return impl::MakeDraftBench(points, env);
    case OperatorFamily::kNormsResidual:
      return impl::MakeNormsResidualBench(points, env);
    case OperatorFamily::kBeamSelection:
      return impl::MakeBeamSelectionBench(points, env);
    case OperatorFamily::kMemcpyHost:
      return impl::MakeHostCopyBench(points, env);
    case OperatorFamily::kStorageRead:
      return impl::MakeStorageReadBench(points, env);
    case OperatorFamily::kExpertLoad:
      return impl::MakeExpertLoadBench(points, env);
    case OperatorFamily::kExpertReader:
      return impl::MakeExpertReaderBench(points, env);
    case OperatorFamily::kMemcpyH2dPinned:
    case OperatorFamily::kMemcpyH2dPageable:
    case OperatorFamily::kMemcpyD2hPinned:
    case OperatorFamily::kMemcpyD2hPageable:
      break;
  }
  throw base::Error("operator bench: " + ToString(first.family) + " runs on a GPU only, not on '" +
                    first.device + "'");
}

int64_t FlushedIterations(double min_time_s, double pass_s) {
  if (!(pass_s > 0)) return kMaxFlushedIterations;
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(min_time_s / pass_s)), 1,
                             kMaxFlushedIterations);
}

void FlushFromCaches(std::span<const std::byte> bytes) {
#if defined(__x86_64__)
  for (size_t at = 0; at < bytes.size(); at += 64) _mm_clflush(bytes.data() + at);
  if (!bytes.empty()) _mm_clflush(bytes.data() + bytes.size() - 1);
  _mm_mfence();
#else
  (void)bytes;
  throw base::Error("profiler: flushing operands from the caches needs clflush (x86-64)");
#endif
}

CacheEvictor::CacheEvictor(int64_t cache_bytes)
    : buffer_(static_cast<size_t>(BytesFor(cache_bytes) / 8), 1) {}

namespace {

// Not instrumented by the sanitizers: it reads its own buffer in bounds, and instrumented it took a
// quarter of a quick profile's time under ASan (the evictor reads 2 x the cache before each pass).
__attribute__((no_sanitize("address", "undefined"))) int64_t SumOfWords(const int64_t* begin,
                                                                        const int64_t* end) {
  int64_t sum = 0;
  for (const int64_t* word = begin; word < end; ++word) sum += *word;
  return sum;
}

}  // namespace

void CacheEvictor::EvictCaches(kernels::ThreadPool& pool) const {
  const int64_t tasks = pool.size();
  const int64_t words = static_cast<int64_t>(buffer_.size());
  std::vector<int64_t> sums(static_cast<size_t>(tasks));
  pool.Run(tasks, [&](int64_t task, int) {
    sums[task] = SumOfWords(buffer_.data() + task * words / tasks,
                            buffer_.data() + (task + 1) * words / tasks);
  });
  benchmark::DoNotOptimize(sums.data());
}

namespace impl {

void FillWeights(uint16_t* values, int64_t count) {
  kernels::Bf16 pattern[17];
  for (int j = 0; j < 17; ++j) pattern[j] = kernels::FloatToBf16(static_cast<float>(j - 8) * 0.01f);
  for (int64_t i = 0; i < count; ++i) values[i] = pattern[i % 17];
}

std::string CyclingNote(const std::string& label, int64_t blocks, int64_t block_bytes,
                        int64_t cache_bytes) {
  return label + ": weights cycled over " + std::to_string(blocks) + " blocks of " +
         std::to_string(block_bytes) + " bytes (" + std::to_string(blocks * block_bytes) +
         " bytes > 2 x the cache of " + std::to_string(cache_bytes) +
         " bytes), so every call reads them from DRAM";
}

}  // namespace impl
}  // namespace moelab::profiler
