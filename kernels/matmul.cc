#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"

namespace moelab {
namespace kernels_internal {

int64_t RowsPerTask(int64_t /*m*/, int64_t n, int threads) {
  // Enough tasks to balance threads, each whole 32-row panels, at most 256 rows.
  const int64_t target_tasks = static_cast<int64_t>(threads) * 4;
  const int64_t rows = (n + target_tasks - 1) / target_tasks;
  return std::clamp<int64_t>((rows + 31) / 32 * 32, 32, 256);
}

int64_t ScratchBytes(int64_t m) { return m > 8 ? Avx512ScratchBytes() : 64; }

}  // namespace kernels_internal

namespace {

using kernels_internal::MatmulRowsFn;

MatmulRowsFn RowsFunction(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16: return kernels_internal::MatmulRowsAvx512Bf16;
    case Isa::kAvx2: return kernels_internal::MatmulRowsAvx2;
    case Isa::kScalar: return kernels_internal::MatmulRowsScalar;
  }
  return kernels_internal::MatmulRowsScalar;
}

// Per-thread buffers reused across calls (no allocation on the decode path).
struct ThreadScratch {
  std::vector<Bf16> x_bf16;
  void* lanes = nullptr;
  int64_t lane_bytes = 0;
  ~ThreadScratch() { std::free(lanes); }
  void* Lanes(int64_t bytes) {
    if (bytes > lane_bytes) {
      std::free(lanes);
      lanes = std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
      lane_bytes = bytes;
    }
    return lanes;
  }
};

ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

}  // namespace

void ConvertToBf16(const float* in, int64_t count, Bf16* out) {
  if (ActiveIsa() == Isa::kAvx512Bf16) {
    kernels_internal::ConvertToBf16Avx512(in, count, out);
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = FloatToBf16(in[i]);
}

void MatmulBf16Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                    int64_t ldy, ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  const MatmulRowsFn rows_fn = RowsFunction(ActiveIsa());
  const int64_t scratch_bytes = kernels_internal::ScratchBytes(m);
  // Below ~100K multiply-adds, waking other threads costs more than it saves.
  if (m * n * k < (int64_t{1} << 17)) {
    rows_fn(x, m, k, w, 0, n, y, ldy, Scratch().Lanes(scratch_bytes));
    return;
  }
  const int64_t rows_per_task = kernels_internal::RowsPerTask(m, n, pool.size());
  const int64_t tasks = (n + rows_per_task - 1) / rows_per_task;
  pool.Run(tasks, [&](int64_t task, int /*thread*/) {
    const int64_t begin = task * rows_per_task;
    const int64_t end = std::min(n, begin + rows_per_task);
    rows_fn(x, m, k, w, begin, end, y, ldy, Scratch().Lanes(scratch_bytes));
  });
}

void MatmulBf16(const float* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                int64_t ldy, ThreadPool& pool) {
  std::vector<Bf16>& x_bf16 = Scratch().x_bf16;
  x_bf16.resize(static_cast<size_t>(m * k));
  ConvertToBf16(x, m * k, x_bf16.data());
  MatmulBf16Bf16(x_bf16.data(), m, k, w, n, y, ldy, pool);
}

}  // namespace moelab
