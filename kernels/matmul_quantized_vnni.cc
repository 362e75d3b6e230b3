// Compiled with AVX-512 F/BW/VL/VNNI (+FMA, F16C); only called when the CPU has them. The quantized
// matmul's block sums with vpdpbusd on 256-bit vectors (kernels/matmul_quantized_tiles.h): one
// instruction adds 4 unsigned x signed byte products into each int32, exactly, where AVX2 needs
// vpmaddubsw + vpmaddwd (+ vpsignb twice for q8_0), and EVEX gives 32 registers, so tiles keep
// more groups in flight. The sums are the same exact integers, so the outputs are the same bits as
// AVX2's and the scalar reference's.
//   The unsigned operand is the weight: q8_0 takes w + 128 (w xor 0x80, in [1, 255]) and subtracts
//   128 x sum(x_q) per block; q4_0 takes the nibble q in [0, 15] and subtracts 8 x sum(x_q) (its
//   -8 offset). Per block and row, |sum| <= 32 x 255 x 127 < 2^20: no overflow. The activation
//   quant sums come with the quantized activations, so the offsets cost one subtract per block.
#include <immintrin.h>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_quantized_tiles.h"

namespace moelab::kernels::internal {
namespace {

struct VnniBlockSums {
  // 32 registers: T x G int32 sums + T x G fp32 accumulators + G weight vectors + broadcasts.
  static constexpr int kDecode1Groups = 8;
  static constexpr int kDecode2Groups = 4;
  static constexpr int kDecodeTileTokens = 4;
  static constexpr int kDecodeTileGroups = 2;
  static constexpr int kPrefillTokens = 6;
  static constexpr int kPrefillGroups = 2;
  static constexpr int64_t kPrefillBlocks = 16;  // k blocks per pass: two groups' records in L1

  template <QuantFormat F, int T, int G>
  static inline __attribute__((always_inline)) void BlockSums(const uint8_t* const (&record)[G],
                                                              const TileActivations<T>& a,
                                                              int64_t b, __m256i (&sum)[T][G]) {
    constexpr int kOffsetShift = F == QuantFormat::kQ8_0 ? 7 : 3;  // x 128 or x 8
    ZeroSums(sum);
    if constexpr (F == QuantFormat::kQ8_0) {
      const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 1
      for (int v = 0; v < 8; ++v) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          const __m256i w_biased = _mm256_xor_si256(LoadQuants(record[g], v), bias);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            sum[t][g] = _mm256_dpbusd_epi32(sum[t][g], w_biased,
                                            BroadcastQuad(a.quants[t] + 32 * b + 4 * v));
          }
        }
      }
    } else {
#pragma GCC unroll 1
      for (int v = 0; v < 4; ++v) {
#pragma GCC unroll 8
        for (int g = 0; g < G; ++g) {
          __m256i lo, hi;
          Q4Nibbles(record[g], v, lo, hi);
#pragma GCC unroll 8
          for (int t = 0; t < T; ++t) {
            const int8_t* xt = a.quants[t] + 32 * b + 4 * v;
            sum[t][g] = _mm256_dpbusd_epi32(sum[t][g], lo, BroadcastQuad(xt));
            sum[t][g] = _mm256_dpbusd_epi32(sum[t][g], hi, BroadcastQuad(xt + 16));
          }
        }
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256i offset = _mm256_slli_epi32(_mm256_set1_epi32(a.sums[t][b]), kOffsetShift);
#pragma GCC unroll 8
      for (int g = 0; g < G; ++g) sum[t][g] = _mm256_sub_epi32(sum[t][g], offset);
    }
  }
};

}  // namespace

void MatmulQuantizedRowsVnni(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  QuantizedRows<VnniBlockSums>(x, w, n_begin, n_end, y, ldy);
}

}  // namespace moelab::kernels::internal
