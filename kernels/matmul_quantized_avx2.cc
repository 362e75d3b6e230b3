// Compiled with -mavx2 -mfma -mf16c; only called when the CPU has them. The quantized matmul
// (kernels/quantized_matrix.h layout): lanes are 8 output rows; per k element the 8 rows' quants
// are widened to int32, converted and scaled (q8_0: d * q; q4_0: fma(q, d, -8d) -- both exact),
// then each token's element (rounded to bf16) is broadcast into one FMA per output, in k order:
// the same bits as the scalar reference, whatever the batch, tile or thread count.
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_internal.h"
#include "kernels/quantized_matrix.h"

namespace moelab::kernels_internal {
namespace {

constexpr int64_t kRows = QuantizedMatrix::kGroupRows;
constexpr int64_t kAheadBytes = 1024;

__m256i RowMask(int64_t rows) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rows)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// T tokens x G groups over k blocks [b_begin, b_end). g0: the first group's record 0; groups are
// `group_stride` bytes apart; rows[g]: valid rows of group g. first: start at zero, else at y.
template <QuantFormat F, int T, int G, bool kPrefetch>
void Tile(const float* x, int64_t ldx, int64_t k, const uint8_t* g0, int64_t group_stride, const int64_t (&rows)[G],
          int64_t b_begin, int64_t b_end, bool first, float* y, int64_t ldy) {
  constexpr int64_t kRecord = QuantizedMatrix::RecordBytes(F);
  __m256 acc[T][G];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      acc[t][g] = first ? _mm256_setzero_ps() : _mm256_maskload_ps(y + t * ldy + g * kRows, RowMask(rows[g]));
    }
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const int64_t count = std::min<int64_t>(kQuantBlock, k - b * kQuantBlock);
    const float* xb = x + b * kQuantBlock;
    __m256 scale[G], offset[G];
    const uint8_t* quants[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const uint8_t* record = g0 + g * group_stride + b * kRecord;
      if constexpr (kPrefetch) {
        for (int64_t line = 0; line < kRecord; line += 64) _mm_prefetch(reinterpret_cast<const char*>(record) + kAheadBytes + line, _MM_HINT_T0);
      }
      scale[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record)));
      offset[g] = _mm256_mul_ps(scale[g], _mm256_set1_ps(-8.0f));
      quants[g] = record + 16;
    }
    const auto accumulate = [&](int64_t j, const __m256 (&w)[G]) {
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_broadcast_ss(xb + t * ldx + j);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) acc[t][g] = _mm256_fmadd_ps(xv, w[g], acc[t][g]);
      }
    };
    if constexpr (F == QuantFormat::kQ8_0) {
      for (int64_t j = 0; j < count; ++j) {
        __m256 w[G];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quants[g] + 8 * j)));
          w[g] = _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale[g]);
        }
        accumulate(j, w);
      }
    } else {
      for (int64_t j = 0; j < count; j += 2) {
        __m256i bytes[G];
        __m256 w[G];
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          bytes[g] = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(quants[g] + 4 * j)));
          const __m256i low = _mm256_and_si256(bytes[g], _mm256_set1_epi32(0x0f));
          w[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low), scale[g], offset[g]);
        }
        accumulate(j, w);
        if (j + 1 < count) {
#pragma GCC unroll 8
          for (int g = 0; g < G; ++g) w[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(bytes[g], 4)), scale[g], offset[g]);
          accumulate(j + 1, w);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) _mm256_maskstore_ps(y + t * ldy + g * kRows, RowMask(rows[g]), acc[t][g]);
  }
}

// Groups in flight and tokens per tile: >= 4 independent accumulators, <= 16 registers.
constexpr int GroupsFor(int tokens) { return tokens == 1 ? 4 : 2; }
constexpr int64_t kTileTokens = 4;
constexpr int64_t kPrefillBlocks = 16;  // k blocks per pass in prefill: 16 x 16 rows' records stay in L1

template <QuantFormat F, int T, int G>
void TilesOverRows(const float* x, int64_t m, int64_t k, const QuantizedMatrix& w, int64_t n_begin, int64_t n_end,
                   int64_t b_begin, int64_t b_end, bool prefetch, float* y, int64_t ldy) {
  const int64_t stride = w.blocks() * w.record_bytes();
  int64_t row = n_begin;
  for (; row + (G - 1) * kRows < n_end; row += G * kRows) {
    int64_t rows[G];
    for (int g = 0; g < G; ++g) rows[g] = std::clamp<int64_t>(n_end - row - g * kRows, 0, kRows);
    const uint8_t* g0 = w.group(row / kRows);
    for (int64_t t = 0; t < m; t += T) {
      const int64_t tokens = std::min<int64_t>(T, m - t);
      const bool first = b_begin == 0, ahead = prefetch && t == 0;
      const float* xt = x + t * k;
      float* yt = y + t * ldy + row;
      // A last tile of fewer tokens: the same per-output arithmetic.
      switch (tokens) {
        case T: ahead ? Tile<F, T, G, true>(xt, k, k, g0, stride, rows, b_begin, b_end, first, yt, ldy)
                      : Tile<F, T, G, false>(xt, k, k, g0, stride, rows, b_begin, b_end, first, yt, ldy); break;
        case 3: if constexpr (T > 3) Tile<F, 3, G, false>(xt, k, k, g0, stride, rows, b_begin, b_end, first, yt, ldy); break;
        case 2: if constexpr (T > 2) Tile<F, 2, G, false>(xt, k, k, g0, stride, rows, b_begin, b_end, first, yt, ldy); break;
        default: if constexpr (T > 1) Tile<F, 1, G, false>(xt, k, k, g0, stride, rows, b_begin, b_end, first, yt, ldy); break;
      }
    }
  }
  if constexpr (G > 1) {
    if (row < n_end) TilesOverRows<F, T, G - 1>(x, m, k, w, row, n_end, b_begin, b_end, prefetch, y, ldy);
  }
}

template <QuantFormat F>
void QuantizedRows(const float* x, int64_t m, const QuantizedMatrix& w, int64_t n_begin, int64_t n_end, float* y,
                   int64_t ldy) {
  const int64_t k = w.cols(), blocks = w.blocks();
  if (m == 1) {
    TilesOverRows<F, 1, GroupsFor(1)>(x, m, k, w, n_begin, n_end, 0, blocks, true, y, ldy);
    return;
  }
  if (m <= 2 * kTileTokens) {  // decode: one pass over the weights (a second tile reads them from L1/L2)
    TilesOverRows<F, kTileTokens, GroupsFor(2)>(x, m, k, w, n_begin, n_end, 0, blocks, true, y, ldy);
    return;
  }
  for (int64_t row = n_begin; row < n_end; row += 2 * kRows) {
    for (int64_t b = 0; b < blocks; b += kPrefillBlocks) {
      TilesOverRows<F, kTileTokens, 2>(x, m, k, w, row, std::min(n_end, row + 2 * kRows), b,
                                       std::min(blocks, b + kPrefillBlocks), false, y, ldy);
    }
  }
}

}  // namespace

void MatmulQuantizedRowsAvx2(const float* x, int64_t m, const QuantizedMatrix& w, int64_t n_begin, int64_t n_end,
                             float* y, int64_t ldy) {
  if (w.format() == QuantFormat::kQ8_0) {
    QuantizedRows<QuantFormat::kQ8_0>(x, m, w, n_begin, n_end, y, ldy);
  } else {
    QuantizedRows<QuantFormat::kQ4_0>(x, m, w, n_begin, n_end, y, ldy);
  }
}

}  // namespace moelab::kernels_internal
