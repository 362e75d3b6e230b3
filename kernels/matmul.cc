#include "kernels/matmul.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/matmul_internal.h"
#include "kernels/scratch.h"

namespace moelab::kernels {
namespace internal {

int64_t RowsPerTask(int64_t n, int threads) {
  // Enough tasks to balance threads, each whole 16-row groups, 32 to 256 rows.
  const int64_t target_tasks = static_cast<int64_t>(threads) * 4;
  const int64_t rows = (n + target_tasks - 1) / target_tasks;
  return std::clamp<int64_t>((rows + 15) / 16 * 16, 32, 256);
}

}  // namespace internal

namespace {

using internal::MatmulPackedRowsFn;

// The fp32-FMA kernel on packed weights for this ISA, or null (AVX512-BF16 and scalar have their
// own).
MatmulPackedRowsFn FmaPackedRowsFunction(Isa isa) {
  switch (isa) {
    case Isa::kAvx2:
      return internal::MatmulPackedRowsAvx2;
    case Isa::kAvx512F:
      return internal::MatmulPackedRowsAvx512F;
    default:
      return nullptr;
  }
}

// Per-thread buffers reused across calls (no allocation on the decode path).
struct ThreadScratch {
  std::vector<Bf16> x_bf16;
  std::vector<float> x_rounded;      // fp32-FMA ISAs: the activations rounded to bf16, as floats
  std::vector<Bf16> unpacked_group;  // scalar: one 16-row group of packed weights, row-major
  QuantizedActivations x_quantized;  // quantized weights: the activations per block of 32
  int32_t* pairs = nullptr;  // 64-byte aligned (the packed tokens are read with aligned loads)
  int64_t pair_capacity = 0;
  ~ThreadScratch() { std::free(pairs); }
  int32_t* Pairs(int64_t count) {
    if (count > pair_capacity) {
      std::free(pairs);
      pairs = static_cast<int32_t*>(
          std::aligned_alloc(64, static_cast<size_t>((count * 4 + 63) / 64 * 64)));
      pair_capacity = count;
    }
    return pairs;
  }
};

ThreadScratch& Scratch() {
  thread_local ThreadScratch scratch;
  return scratch;
}

// Calls rows(n_begin, n_end) over [0, n) in tasks on the pool.
template <typename Rows>
void ParallelRows(int64_t m, int64_t k, int64_t n, ThreadPool& pool, const Rows& rows) {
  // Below ~100K multiply-adds, waking other threads costs more than it saves.
  if (m * n * k < (int64_t{1} << 17)) {
    rows(0, n);
    return;
  }
  const int64_t rows_per_task = internal::RowsPerTask(n, pool.size());
  const int64_t tasks = (n + rows_per_task - 1) / rows_per_task;
  pool.Run(tasks, [&](int64_t task, int /*thread*/) {
    const int64_t begin = task * rows_per_task;
    rows(begin, std::min(n, begin + rows_per_task));
  });
}

// x (fp32 or bf16) packed for the AVX512-BF16 batch kernel, 16-token blocks spread over the pool.
template <typename Element>
const int32_t* PackTokenPairs(const Element* x, int64_t m, int64_t k, ThreadPool& pool) {
  int32_t* out = Scratch().Pairs(internal::TokenPairsCount(m, k));
  const int64_t block_dwords = internal::TokenPairsCount(16, k);
  const auto pack = [&](int64_t block, int /*thread*/) {
    internal::PackTokenPairsAvx512(x + block * 16 * k, std::min<int64_t>(16, m - block * 16), k,
                                   out + block * block_dwords);
  };
  const int64_t blocks = (m + 15) / 16;
  if (m * k < (int64_t{1} << 16)) {
    for (int64_t block = 0; block < blocks; ++block) pack(block, 0);
  } else {
    pool.Run(blocks, pack);
  }
  return out;
}

void MatmulAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m, int64_t k, const Bf16* w,
                      int64_t n, float* y, int64_t ldy, ThreadPool& pool) {
  ParallelRows(m, k, n, pool, [&](int64_t begin, int64_t end) {
    internal::MatmulRowsAvx512Bf16(x, x_pairs, m, k, w, begin, end, y, ldy);
  });
}

// Scalar on packed weights: each 16-row group unpacked to row-major and run through the row-major
// kernel, so the result equals the row-major result bit for bit.
void MatmulPackedScalar(const Bf16* x, int64_t m, const PackedBf16Matrix& w, float* y, int64_t ldy,
                        ThreadPool& pool) {
  const int64_t k = w.cols(), n = w.rows(), group_rows = PackedBf16Matrix::kGroupRows;
  ParallelRows(m, k, n, pool, [&](int64_t begin, int64_t end) {
    std::vector<Bf16>& rows = Scratch().unpacked_group;
    rows.resize(static_cast<size_t>(group_rows * k));
    for (int64_t j = begin; j < end; j += group_rows) {
      const int64_t count = std::min(group_rows, end - j);
      w.UnpackRows(j, count, rows.data());
      internal::MatmulRowsScalar(x, m, k, rows.data(), 0, count, y + j, ldy);
    }
  });
}

// fp32-FMA ISAs: x_rounded (m x k, rounded to bf16) against the packed weights.
void MatmulPackedFma(MatmulPackedRowsFn rows_fn, const float* x_rounded, int64_t m,
                     const PackedBf16Matrix& w, float* y, int64_t ldy, ThreadPool& pool) {
  ParallelRows(m, w.cols(), w.rows(), pool, [&](int64_t begin, int64_t end) {
    rows_fn(x_rounded, m, w.cols(), w.data(), begin, end, y, ldy);
  });
}

// The activations as fp32-FMA kernels read them (fp32 values representable in bf16).
const float* RoundedActivations(const float* x, int64_t count) {
  std::vector<float>& out = Scratch().x_rounded;
  out.resize(static_cast<size_t>(count));
  if (ActiveIsa() == Isa::kScalar) {
    for (int64_t i = 0; i < count; ++i)
      out[static_cast<size_t>(i)] = Bf16ToFloat(FloatToBf16(x[i]));
  } else {
    internal::RoundToBf16FloatsAvx2(x, count, out.data());
  }
  return out.data();
}
const float* RoundedActivations(const Bf16* x, int64_t count) {
  std::vector<float>& out = Scratch().x_rounded;
  out.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = Bf16ToFloat(x[i]);
  return out.data();
}

void MatmulPackedAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m,
                            const PackedBf16Matrix& w, float* y, int64_t ldy, ThreadPool& pool) {
  ParallelRows(m, w.cols(), w.rows(), pool, [&](int64_t begin, int64_t end) {
    internal::MatmulPackedRowsAvx512Bf16(x, x_pairs, m, w.cols(), w.data(), begin, end, y, ldy);
  });
}

}  // namespace

void ConvertToBf16(const float* in, int64_t count, Bf16* out) {
  if (ActiveIsa() == Isa::kAvx512Bf16) {
    internal::ConvertToBf16Avx512(in, count, out);
    return;
  }
  for (int64_t i = 0; i < count; ++i) out[i] = FloatToBf16(in[i]);
}

void MatmulBf16Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                    int64_t ldy, ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx512Bf16) {
    const int32_t* x_pairs =
        m > internal::kAvx512Bf16ChunkedDecodeTokens ? PackTokenPairs(x, m, k, pool) : nullptr;
    MatmulAvx512Bf16(x, x_pairs, m, k, w, n, y, ldy, pool);
    return;
  }
  if (const MatmulPackedRowsFn rows_fn = FmaPackedRowsFunction(isa)) {
    // The fp32-FMA kernels read packed weights only: row-major callers (tests, benchmarks) pack per
    // call.
    MatmulPackedFma(rows_fn, RoundedActivations(x, m * k), m, PackedBf16Matrix::Pack(w, n, k), y,
                    ldy, pool);
    return;
  }
  ParallelRows(m, k, n, pool, [&](int64_t begin, int64_t end) {
    internal::MatmulRowsScalar(x, m, k, w, begin, end, y, ldy);
  });
}

void MatmulBf16(const float* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                int64_t ldy, ThreadPool& pool) {
  if (m <= 0 || n <= 0) return;
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx512Bf16 && m > internal::kAvx512Bf16ChunkedDecodeTokens) {
    // The batch kernel reads tokens pair-major: round and pack in one pass.
    MatmulAvx512Bf16(nullptr, PackTokenPairs(x, m, k, pool), m, k, w, n, y, ldy, pool);
    return;
  }
  if (const MatmulPackedRowsFn rows_fn = FmaPackedRowsFunction(isa)) {
    MatmulPackedFma(rows_fn, RoundedActivations(x, m * k), m, PackedBf16Matrix::Pack(w, n, k), y,
                    ldy, pool);
    return;
  }
  std::vector<Bf16>& x_bf16 = Scratch().x_bf16;
  x_bf16.resize(static_cast<size_t>(m * k));
  ConvertToBf16(x, m * k, x_bf16.data());
  MatmulBf16Bf16(x_bf16.data(), m, k, w, n, y, ldy, pool);
}

void MatmulBf16Bf16(const Bf16* x, int64_t m, const PackedBf16Matrix& w, float* y, int64_t ldy,
                    ThreadPool& pool) {
  if (m <= 0 || w.rows() <= 0) return;
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx512Bf16) {
    const int32_t* x_pairs = m > internal::kAvx512Bf16ChunkedDecodeTokens
                                 ? PackTokenPairs(x, m, w.cols(), pool)
                                 : nullptr;
    MatmulPackedAvx512Bf16(x, x_pairs, m, w, y, ldy, pool);
    return;
  }
  if (const MatmulPackedRowsFn rows_fn = FmaPackedRowsFunction(isa)) {
    MatmulPackedFma(rows_fn, RoundedActivations(x, m * w.cols()), m, w, y, ldy, pool);
    return;
  }
  MatmulPackedScalar(x, m, w, y, ldy, pool);
}

void MatmulBf16(const float* x, int64_t m, const PackedBf16Matrix& w, float* y, int64_t ldy,
                ThreadPool& pool) {
  if (m <= 0 || w.rows() <= 0) return;
  const int64_t k = w.cols();
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx512Bf16 && m > internal::kAvx512Bf16ChunkedDecodeTokens) {
    MatmulPackedAvx512Bf16(nullptr, PackTokenPairs(x, m, k, pool), m, w, y, ldy, pool);
    return;
  }
  if (const MatmulPackedRowsFn rows_fn = FmaPackedRowsFunction(isa)) {
    MatmulPackedFma(rows_fn, RoundedActivations(x, m * k), m, w, y, ldy, pool);
    return;
  }
  std::vector<Bf16>& x_bf16 = Scratch().x_bf16;
  x_bf16.resize(static_cast<size_t>(m * k));
  ConvertToBf16(x, m * k, x_bf16.data());
  MatmulBf16Bf16(x_bf16.data(), m, w, y, ldy, pool);
}

void ReserveBf16MatmulScratch(int64_t m, int64_t k) {
  if (m <= 0 || k <= 0) return;
  ThreadScratch& scratch = Scratch();
  const Isa isa = ActiveIsa();
  if (isa == Isa::kAvx512Bf16) {
    // Decode-sized calls convert x to bf16; larger ones pack it in token pairs.
    GrowTouched(scratch.x_bf16, std::min(m, internal::kAvx512Bf16ChunkedDecodeTokens) * k);
    if (m > internal::kAvx512Bf16ChunkedDecodeTokens) {
      const int64_t count = internal::TokenPairsCount(m, k);
      if (count > scratch.pair_capacity) std::fill_n(scratch.Pairs(count), count, 0);
    }
    return;
  }
  if (FmaPackedRowsFunction(isa)) {
    GrowTouched(scratch.x_rounded, m * k);
    return;
  }
  GrowTouched(scratch.x_bf16, m * k);
  GrowTouched(scratch.unpacked_group, PackedBf16Matrix::kGroupRows * k);
}

void ReserveQuantizedMatmulScratch(int64_t m, int64_t k) {
  if (m <= 0 || k <= 0) return;
  // Vectors keep their capacity when a later call sizes them down, so the pages stay resident.
  ResizeQuantizedActivations(m, k, Scratch().x_quantized);
}

void QuantizeActivations(const float* x, int64_t m, int64_t k, QuantizedActivations& out,
                         ThreadPool& pool) {
  ResizeQuantizedActivations(m, k, out);
  const auto quantize = ActiveIsa() == Isa::kScalar ? QuantizeActivationTokensScalar
                                                    : internal::QuantizeActivationTokensAvx2;
  constexpr int64_t kTokensPerTask = 16;
  if (m * k < (int64_t{1} << 16)) {
    quantize(x, k, 0, m, out);
    return;
  }
  pool.Run((m + kTokensPerTask - 1) / kTokensPerTask, [&](int64_t task, int /*thread*/) {
    quantize(x, k, task * kTokensPerTask, std::min(m, (task + 1) * kTokensPerTask), out);
  });
}

void MatmulQuantized(const float* x, int64_t m, const QuantizedMatrix& w, float* y, int64_t ldy,
                     ThreadPool& pool) {
  if (m <= 0 || w.rows() <= 0) return;
  QuantizedActivations& xq = Scratch().x_quantized;
  QuantizeActivations(x, m, w.cols(), xq, pool);
  const QuantizedKernel kernel = ActiveQuantizedKernel();
  const auto rows_fn = kernel == QuantizedKernel::kScalar ? internal::MatmulQuantizedRowsScalar
                       : kernel == QuantizedKernel::kAvx2 ? internal::MatmulQuantizedRowsAvx2
                                                          : internal::MatmulQuantizedRowsVnni;
  ParallelRows(m, w.cols(), w.rows(), pool,
               [&](int64_t begin, int64_t end) { rows_fn(xq, w, begin, end, y, ldy); });
}

}  // namespace moelab::kernels
