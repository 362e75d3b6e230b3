// Compiled with -mavx2 -mfma -mf16c; only called when the CPU has them. The quantized matmul as an
// integer dot product (llama.cpp's ggml_vec_dot_q8_0_q8_0 / q4_0_q8_0 idea, lanes-are-rows
// layout of kernels/quantized_matrix.h): activations quantized per block of 32
// (kernels/quantized_activations.h); per block, 8 rows' int32 sums come from vpmaddubsw (unsigned x
// signed bytes -> int16 pairs) and vpmaddwd (-> int32), exact; then each output adds
// fma(d_w * d_x, float(sum), acc) in block order -- what the scalar reference computes, whatever
// the batch, tile or thread count.
//   q8_0: vpmaddubsw(|w|, sign(x, w)) (each int16 <= 2 x 127 x 127, no saturation), widened per
//   vector. q4_0: vpmaddubsw(q, x) with q in [0, 15] unsigned, summed in int16 over the block (8 x
//   2 x 15 x 127
//         <= 30480), widened once; q - 8 is applied as sum - 8 * sum(x_q).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/quantized_activations.h"
#include "kernels/quantized_matrix.h"

namespace moelab::kernels::internal {

void QuantizeActivationTokensAvx2(const float* x, int64_t k, int64_t t_begin, int64_t t_end,
                                  QuantizedActivations& out) {
  constexpr int64_t kBlock = QuantizedActivations::kBlock;
  const __m256 magnitude_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 largest_finite = _mm256_set1_ps(3.40282347e38f), low = _mm256_set1_ps(-127.0f),
               high = _mm256_set1_ps(127.0f);
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < out.blocks; ++b) {
      const size_t at = static_cast<size_t>(t * out.blocks + b);
      const float* xb = x + t * k + b * kBlock;
      int8_t* quants = out.quants.data() + at * kBlock;
      const auto portable = [&] {
        QuantizeActivationBlock(xb, std::min(kBlock, k - b * kBlock), quants, &out.scales[at],
                                &out.sums[at]);
      };
      if (k - b * kBlock < kBlock) {
        portable();
        continue;
      }
      __m256 v[4], largest = _mm256_setzero_ps();
      int finite = 0xff;
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        const __m256 magnitude = _mm256_and_ps(v[i], magnitude_mask);
        finite &= _mm256_movemask_ps(_mm256_cmp_ps(magnitude, largest_finite, _CMP_LE_OQ));
        largest = _mm256_max_ps(largest, magnitude);
      }
      if (finite != 0xff) {  // NaN or infinity: the portable code's NaN scale
        portable();
        continue;
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(largest), _mm256_extractf128_ps(largest, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float d = _mm_cvtss_f32(m4) / 127.0f;
      out.scales[at] = d;
      if (d == 0) {
        std::memset(quants, 0, kBlock);
        out.sums[at] = 0;
        continue;
      }
      const __m256 dv = _mm256_set1_ps(d);
      __m256i q[4];
      for (int i = 0; i < 4; ++i) {
        const __m256 r =
            _mm256_round_ps(_mm256_div_ps(v[i], dv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        q[i] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, low), high));
      }
      const __m256i sum8 =
          _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i sum4 = _mm_add_epi32(_mm256_castsi256_si128(sum8), _mm256_extracti128_si256(sum8, 1));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0x4e));
      sum4 = _mm_add_epi32(sum4, _mm_shuffle_epi32(sum4, 0xb1));
      out.sums[at] = _mm_cvtsi128_si32(sum4);
      // packs interleave 128-bit lanes: dwords come out as q0[0:4] q1[0:4] q2[0:4] q3[0:4] q0[4:8]
      // ...
      const __m256i packed =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(quants),
          _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
  }
}

namespace {

constexpr int64_t kRows = QuantizedMatrix::kGroupRows;
constexpr int64_t kAheadBytes = 1024;

__m256i RowMask(int64_t rows) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rows)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Four consecutive activation quants, in every dword.
__m256i BroadcastQuad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

template <int T, int G>
void Zero(__m256i (&v)[T][G]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) v[t][g] = _mm256_setzero_si256();
  }
}

// T tokens (from t0) x G groups over k blocks [b_begin, b_end). g0: the first group's record 0;
// groups are `group_stride` bytes apart; rows[g]: valid rows of group g. first: start at zero, else
// at y.
template <QuantFormat F, int T, int G, bool kPrefetch>
void Tile(const QuantizedActivations& x, int64_t t0, const uint8_t* g0, int64_t group_stride,
          const int64_t (&rows)[G], int64_t b_begin, int64_t b_end, bool first, float* y,
          int64_t ldy) {
  constexpr int64_t kRecord = QuantizedMatrix::RecordBytes(F);
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* xq[T];
  const float* xd[T];
  const int32_t* xs[T];
  __m256 acc[T][G];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    xq[t] = x.token_quants(t0 + t);
    xd[t] = x.token_scales(t0 + t);
    xs[t] = x.token_sums(t0 + t);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      acc[t][g] = first ? _mm256_setzero_ps()
                        : _mm256_maskload_ps(y + t * ldy + g * kRows, RowMask(rows[g]));
    }
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    const uint8_t* record[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      record[g] = g0 + g * group_stride + b * kRecord;
      if constexpr (kPrefetch) {
        for (int64_t line = 0; line < kRecord; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(record[g]) + kAheadBytes + line, _MM_HINT_T0);
      }
    }
    __m256i sum[T][G];
    if constexpr (F == QuantFormat::kQ8_0) {
      Zero(sum);
      // Not unrolled (here and for q4_0): with all vectors in flight GCC hoists the broadcasts and
      // spills.
#pragma GCC unroll 1
      for (int v = 0; v < 8; ++v) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m256i w =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record[g] + 16 + 32 * v));
          const __m256i magnitude = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i pairs = _mm256_maddubs_epi16(
                magnitude, _mm256_sign_epi8(BroadcastQuad(xq[t] + 32 * b + 4 * v), w));
            sum[t][g] = _mm256_add_epi32(sum[t][g], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    } else {
      const __m256i nibble = _mm256_set1_epi8(0x0f);
      __m256i sum16[T][G];
      Zero(sum16);
#pragma GCC unroll 1
      for (int v = 0; v < 4; ++v) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m256i raw =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record[g] + 16 + 32 * v));
          const __m256i lo = _mm256_and_si256(raw, nibble),
                        hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int8_t* xt = xq[t] + 32 * b + 4 * v;
            sum16[t][g] =
                _mm256_add_epi16(sum16[t][g], _mm256_maddubs_epi16(lo, BroadcastQuad(xt)));
            sum16[t][g] =
                _mm256_add_epi16(sum16[t][g], _mm256_maddubs_epi16(hi, BroadcastQuad(xt + 16)));
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i offset = _mm256_slli_epi32(_mm256_set1_epi32(xs[t][b]), 3);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          sum[t][g] = _mm256_sub_epi32(_mm256_madd_epi16(sum16[t][g], ones), offset);
      }
    }
    __m256 scale[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
      scale[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record[g])));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_broadcast_ss(xd[t] + b);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g)
        acc[t][g] =
            _mm256_fmadd_ps(_mm256_mul_ps(scale[g], dx), _mm256_cvtepi32_ps(sum[t][g]), acc[t][g]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
      _mm256_maskstore_ps(y + t * ldy + g * kRows, RowMask(rows[g]), acc[t][g]);
  }
}

// A last tile of `tokens` < T tokens: the same per-output arithmetic, smaller.
template <QuantFormat F, int T, int G>
void TailTile(int64_t tokens, const QuantizedActivations& x, int64_t t0, const uint8_t* g0,
              int64_t group_stride, const int64_t (&rows)[G], int64_t b_begin, int64_t b_end,
              bool first, float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tokens == T - 1) {
      Tile<F, T - 1, G, false>(x, t0, g0, group_stride, rows, b_begin, b_end, first, y, ldy);
    } else {
      TailTile<F, T - 1, G>(tokens, x, t0, g0, group_stride, rows, b_begin, b_end, first, y, ldy);
    }
  }
}

template <QuantFormat F, int T, int G>
void TilesOverRows(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                   int64_t n_end, int64_t b_begin, int64_t b_end, bool prefetch, float* y,
                   int64_t ldy) {
  const int64_t stride = w.blocks() * w.record_bytes(), m = x.tokens;
  int64_t row = n_begin;
  for (; row + (G - 1) * kRows < n_end; row += G * kRows) {
    int64_t rows[G];
    for (int g = 0; g < G; ++g) rows[g] = std::clamp<int64_t>(n_end - row - g * kRows, 0, kRows);
    const uint8_t* g0 = w.group(row / kRows);
    for (int64_t t = 0; t < m; t += T) {
      const int64_t tokens = std::min<int64_t>(T, m - t);
      const bool first = b_begin == 0, ahead = prefetch && t == 0;
      float* yt = y + t * ldy + row;
      if (tokens == T) {
        ahead ? Tile<F, T, G, true>(x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy)
              : Tile<F, T, G, false>(x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy);
      } else {
        TailTile<F, T, G>(tokens, x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy);
      }
    }
  }
  if constexpr (G > 1) {
    if (row < n_end) TilesOverRows<F, T, G - 1>(x, w, row, n_end, b_begin, b_end, prefetch, y, ldy);
  }
}

// Tiles (tokens x 8-row groups) keep 2 x T x G accumulators (fp32 and the block's int32) within 16
// registers.
constexpr int64_t kPrefillTokens = 5;
constexpr int64_t kPrefillGroups = 1;
constexpr int64_t kPrefillBlocks =
    32;  // k blocks per pass in prefill: one group's records stay in L1

template <QuantFormat F>
void QuantizedRows(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                   int64_t n_end, float* y, int64_t ldy) {
  const int64_t blocks = w.blocks();
  switch (x.tokens) {
    case 1:
      TilesOverRows<F, 1, 4>(x, w, n_begin, n_end, 0, blocks, true, y, ldy);
      return;
    case 2:
      TilesOverRows<F, 2, 2>(x, w, n_begin, n_end, 0, blocks, true, y, ldy);
      return;
    default:
      break;
  }
  if (x.tokens <= 8) {  // decode: one pass over the weights (a second tile reads them from L1/L2)
    TilesOverRows<F, 4, 1>(x, w, n_begin, n_end, 0, blocks, true, y, ldy);
    return;
  }
  for (int64_t row = n_begin; row < n_end; row += kPrefillGroups * kRows) {
    for (int64_t b = 0; b < blocks; b += kPrefillBlocks) {
      TilesOverRows<F, kPrefillTokens, kPrefillGroups>(
          x, w, row, std::min(n_end, row + kPrefillGroups * kRows), b,
          std::min(blocks, b + kPrefillBlocks), false, y, ldy);
    }
  }
}

}  // namespace

void MatmulQuantizedRowsAvx2(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  if (w.format() == QuantFormat::kQ8_0) {
    QuantizedRows<QuantFormat::kQ8_0>(x, w, n_begin, n_end, y, ldy);
  } else {
    QuantizedRows<QuantFormat::kQ4_0>(x, w, n_begin, n_end, y, ldy);
  }
}

}  // namespace moelab::kernels::internal
