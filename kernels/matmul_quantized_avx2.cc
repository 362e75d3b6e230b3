// Compiled with -mavx2 -mfma -mf16c; only called when the CPU has them. The quantized matmul as an
// integer dot product (llama.cpp's ggml_vec_dot_q8_0_q8_0 / q4_0_q8_0 idea) on the tiles of
// kernels/matmul_quantized_tiles.h, with AVX2's block sums (vpmaddubsw + vpmaddwd); and the AVX2
// activation quantizer, bit-identical to the portable one.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_quantized_tiles.h"
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

// GCC reassociates integer vector additions: with a block's vectors unrolled it computes every
// product first and sums them as a tree (a register per product: spills), and with the loop kept it
// copies every accumulator once per iteration (vmovdqa). An empty asm that passes the running sum
// through a register pins the chain in program order, so the loops unroll with neither.
inline void KeepAdditionOrder(__m256i& sum) { asm("" : "+x"(sum)); }

// vpmaddubsw multiplies unsigned by signed bytes into int16 pairs: q8_0 takes |w| and sign(x, w),
// or |x| and sign(w, x) (each pair <= 2 x 127 x 127, no saturation) and widens per vector with
// vpmaddwd; q4_0 takes the unsigned nibble q in [0, 15] and x, sums in int16 over the whole block
// (<= 8 x 2 x 15 x 127 = 30480), widens once and subtracts 8 x sum(x_q) for the -8 offset. 16
// registers: tiles keep two accumulators per (token, group) -- the block's int32 and the running
// fp32.
struct Avx2BlockSums {
  // Measured on an AVX2 Zen 3 (one thread, 1-token expert FFN, per CPU second against a DRAM
  // read): 512 faster than 1024, 768 no better than 512.
  static constexpr int64_t kDecodeAheadBytes = 512;
  static constexpr int kDecode1Groups = 4;
  static constexpr int kDecode2Groups = 2;
  // One pass over the weights up to 8 tokens; more on the prefill tiles. Forcing 9-64 tokens on
  // the decode tiles measured within noise of this on an AVX-512 CPU's larger caches (AVX2
  // forced), so it stays until an AVX2-only CPU can decide.
  static constexpr int64_t kDecodeMaxTokens = 8;
  static constexpr int kDecodeTileTokens = 4;
  static constexpr int kDecodeTileGroups = 1;
  static constexpr int kPrefillTokens = 5;
  static constexpr int kPrefillGroups = 1;
  static constexpr int64_t kPrefillBlocks = 32;  // k blocks per pass: a group's records stay in L1

  template <QuantFormat F, int T, int G>
  static inline __attribute__((always_inline)) void BlockSums(const uint8_t* const (&record)[G],
                                                              const TileActivations<T>& a,
                                                              int64_t b, __m256i (&sum)[T][G]) {
    const __m256i ones = _mm256_set1_epi16(1);
    if constexpr (F == QuantFormat::kQ8_0) {
      // The sign goes on the operand there are more of: with more groups than tokens on the
      // weights, maddubs(|x|, sign(w, x)), so |x| is taken once per token quad for all groups;
      // otherwise on the activations, maddubs(|w|, sign(x, w)), |w| once per vector for all tokens.
      constexpr bool kSignOnWeights = G > T;
      ZeroSums(sum);
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) {
        __m256i x[T], x_magnitude[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          x[t] = BroadcastQuad(a.quants[t] + 32 * b + 4 * v);
          if constexpr (kSignOnWeights) x_magnitude[t] = _mm256_sign_epi8(x[t], x[t]);
        }
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m256i w = LoadQuants(record[g], v);
          const __m256i w_magnitude = _mm256_sign_epi8(w, w);  // unused (dropped) when on weights
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const __m256i pairs =
                kSignOnWeights ? _mm256_maddubs_epi16(x_magnitude[t], _mm256_sign_epi8(w, x[t]))
                               : _mm256_maddubs_epi16(w_magnitude, _mm256_sign_epi8(x[t], w));
            sum[t][g] = _mm256_add_epi32(sum[t][g], _mm256_madd_epi16(pairs, ones));
            KeepAdditionOrder(sum[t][g]);
          }
        }
      }
    } else {
      __m256i sum16[T][G];
      ZeroSums(sum16);
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          __m256i lo, hi;
          Q4Nibbles(record[g], v, lo, hi);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int8_t* xt = a.quants[t] + 32 * b + 4 * v;
            sum16[t][g] =
                _mm256_add_epi16(sum16[t][g], _mm256_maddubs_epi16(lo, BroadcastQuad(xt)));
            sum16[t][g] =
                _mm256_add_epi16(sum16[t][g], _mm256_maddubs_epi16(hi, BroadcastQuad(xt + 16)));
            KeepAdditionOrder(sum16[t][g]);
          }
        }
      }
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        const __m256i offset = _mm256_slli_epi32(_mm256_set1_epi32(a.sums[t][b]), 3);
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g)
          sum[t][g] = _mm256_sub_epi32(_mm256_madd_epi16(sum16[t][g], ones), offset);
      }
    }
  }
};

}  // namespace

void MatmulQuantizedRowsAvx2(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  QuantizedRows<Avx2BlockSums>(x, w, n_begin, n_end, y, ldy);
}

}  // namespace moelab::kernels::internal
