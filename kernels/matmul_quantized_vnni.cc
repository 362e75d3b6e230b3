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
  // Not re-measured on an AVX-512 CPU since AVX2's went to 512: the distance it was measured with.
  static constexpr int64_t kDecodeAheadBytes = kQuantAheadBytes;
  // 32 registers: T x G int32 sums + T x G fp32 accumulators + G weight vectors + broadcasts.
  static constexpr int kDecode1Groups = 8;
  static constexpr int kDecode2Groups = 4;
  static constexpr int64_t kDecodeMaxTokens = 8;  // unused: DecodeByPairs takes 3 and more
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

// 3-8 tokens (decode, SD verify): two groups (16 rows) per 512-bit vector, every token in one tile
// and one pass over the weights (3-4 tokens: two pairs, 32 rows, per tile; 5-8: one pair, for
// registers). The 256-bit tiles above need 4-token x 2-group tiles twice over 8 tokens; here one
// vpdpbusd does 16 rows x 4 k of a token, half the instructions per multiply-add, and the
// per-block scale work is halved too. Per lane the arithmetic is the 256-bit tile's (exact int32
// sums, then fma(d_w * d_x, float(sum), acc) in block order), so the outputs are the same bits.
// On the Xeon (results/kernels-cpu-avx512bf16.md, scripts/bench.sh 5 at 75955ca against f32d3e7):
// q8_0 decode at 4 / 8 tokens 60 / 42 -> 85 / 56 % of the DRAM bound, q4_0 41 / 28 -> 57 / 35 %.
inline __m512i LoadQuantPair(const uint8_t* record0, const uint8_t* record1, int v) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(LoadQuants(record0, v)), LoadQuants(record1, v),
                            1);
}

inline __mmask16 PairMask(int64_t rows0, int64_t rows1) {
  return static_cast<__mmask16>(((1u << rows0) - 1u) | (((1u << rows1) - 1u) << 8));
}

// Tokens [t0, t0 + T); kPrefetch: prefetch the weight streams ahead (off when an earlier chunk of
// tokens has just read the same rows into L1).
template <QuantFormat F, int T, int P, bool kPrefetch = true>
void DecodePairTile(const QuantizedActivations& x, int64_t t0, const uint8_t* g0,
                    int64_t group_stride, const int64_t (&rows)[2 * P], int64_t blocks, float* y,
                    int64_t ldy) {
  constexpr int64_t kRecord = QuantizedMatrix::RecordBytes(F);
  constexpr int kOffsetShift = F == QuantFormat::kQ8_0 ? 7 : 3;  // x 128 or x 8
  TileActivations<T> a;
  __m512 acc[T][P];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    a.quants[t] = x.token_quants(t0 + t);
    a.scales[t] = x.token_scales(t0 + t);
    a.sums[t] = x.token_sums(t0 + t);
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) acc[t][p] = _mm512_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* record[2 * P];
#pragma GCC unroll 8
    for (int g = 0; g < 2 * P; ++g) {
      record[g] = g0 + g * group_stride + b * kRecord;
      if constexpr (kPrefetch) {
        for (int64_t line = 0; line < kRecord; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(record[g]) + kQuantAheadBytes + line,
                       _MM_HINT_T0);
      }
    }
    __m512i sum[T][P];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) sum[t][p] = _mm512_setzero_si512();
    }
    if constexpr (F == QuantFormat::kQ8_0) {
      const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 1
      for (int v = 0; v < 8; ++v) {
        __m512i w_biased[P];
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p)
          w_biased[p] = _mm512_xor_si512(LoadQuantPair(record[2 * p], record[2 * p + 1], v), bias);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t quad;
          std::memcpy(&quad, a.quants[t] + 32 * b + 4 * v, sizeof(quad));
          const __m512i xq = _mm512_set1_epi32(quad);
#pragma GCC unroll 4
          for (int p = 0; p < P; ++p) sum[t][p] = _mm512_dpbusd_epi32(sum[t][p], w_biased[p], xq);
        }
      }
    } else {
      const __m512i nibble = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 1
      for (int v = 0; v < 4; ++v) {
        __m512i lo[P], hi[P];
#pragma GCC unroll 4
        for (int p = 0; p < P; ++p) {
          const __m512i raw = LoadQuantPair(record[2 * p], record[2 * p + 1], v);
          lo[p] = _mm512_and_si512(raw, nibble);
          hi[p] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), nibble);
        }
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
          int32_t quad_lo, quad_hi;
          std::memcpy(&quad_lo, a.quants[t] + 32 * b + 4 * v, sizeof(quad_lo));
          std::memcpy(&quad_hi, a.quants[t] + 32 * b + 16 + 4 * v, sizeof(quad_hi));
          const __m512i xq_lo = _mm512_set1_epi32(quad_lo), xq_hi = _mm512_set1_epi32(quad_hi);
#pragma GCC unroll 4
          for (int p = 0; p < P; ++p) {
            sum[t][p] = _mm512_dpbusd_epi32(sum[t][p], lo[p], xq_lo);
            sum[t][p] = _mm512_dpbusd_epi32(sum[t][p], hi[p], xq_hi);
          }
        }
      }
    }
    __m512 scale[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      scale[p] = _mm512_cvtph_ps(_mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record[2 * p]))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(record[2 * p + 1])), 1));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512i offset = _mm512_slli_epi32(_mm512_set1_epi32(a.sums[t][b]), kOffsetShift);
      const __m512 dx = _mm512_set1_ps(a.scales[t][b]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) {
        acc[t][p] =
            _mm512_fmadd_ps(_mm512_mul_ps(scale[p], dx),
                            _mm512_cvtepi32_ps(_mm512_sub_epi32(sum[t][p], offset)), acc[t][p]);
      }
    }
  }
#pragma GCC unroll 4
  for (int p = 0; p < P; ++p) {
    const __mmask16 mask = PairMask(rows[2 * p], rows[2 * p + 1]);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy + p * 16, mask, acc[t][p]);
  }
}

// Rows in tiles of P pairs of groups while whole pairs remain, then single pairs, then a lone
// last group (no second group's record to pair it with) on the 256-bit tile.
template <QuantFormat F, int T, int P>
void DecodeRowsByPairs(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                       int64_t n_end, float* y, int64_t ldy) {
  const int64_t stride = w.blocks() * w.record_bytes();
  int64_t row = n_begin;
  // A tile needs its last group to exist: its first row below n_end.
  for (; row + (2 * P - 1) * kQuantRows < n_end; row += 2 * P * kQuantRows) {
    int64_t rows[2 * P];
    for (int g = 0; g < 2 * P; ++g)
      rows[g] = std::clamp<int64_t>(n_end - row - g * kQuantRows, 0, kQuantRows);
    DecodePairTile<F, T, P>(x, 0, w.group(row / kQuantRows), stride, rows, w.blocks(), y + row,
                            ldy);
  }
  if constexpr (P > 1) {
    if (row < n_end) DecodeRowsByPairs<F, T, 1>(x, w, row, n_end, y, ldy);
  } else if (row < n_end) {
    QuantTilesOverRows<VnniBlockSums, F, VnniBlockSums::kDecodeTileTokens, 1>(
        x, w, row, n_end, 0, w.blocks(), true, y, ldy);
  }
}

// Tokens [t0, t0 + tokens), 1 <= tokens <= 8, on one pair tile (P = 1).
template <QuantFormat F, bool kPrefetch>
void ChunkPairTile(const QuantizedActivations& x, int64_t t0, int64_t tokens, const uint8_t* g0,
                   int64_t stride, const int64_t (&rows)[2], int64_t blocks, float* y,
                   int64_t ldy) {
  auto tile = [&](auto t) {
    DecodePairTile<F, decltype(t)::value, 1, kPrefetch>(x, t0, g0, stride, rows, blocks,
                                                        y + t0 * ldy, ldy);
  };
  switch (tokens) {
    case 8:
      return tile(std::integral_constant<int, 8>{});
    case 7:
      return tile(std::integral_constant<int, 7>{});
    case 6:
      return tile(std::integral_constant<int, 6>{});
    case 5:
      return tile(std::integral_constant<int, 5>{});
    case 4:
      return tile(std::integral_constant<int, 4>{});
    case 3:
      return tile(std::integral_constant<int, 3>{});
    case 2:
      return tile(std::integral_constant<int, 2>{});
    default:
      return tile(std::integral_constant<int, 1>{});
  }
}

// 9 tokens and more: per pair of groups (16 rows), the tokens in near-equal chunks of at most 8 on
// the pair tile, the first chunk streaming the rows' records from DRAM (prefetched), the others
// reading them from L1 (two q8_0 groups over k = 1024: 17 KB). It replaced the 256-bit prefill
// tiles on this ISA at every token count: their panels read the weights with no prefetch (9 tokens
// took 2x the time of 8) and each vpdpbusd did half the pair tile's work (256 and 1024 tokens
// 1.7-2x slower). Measured: kernels/README.md, "Quantized chunks on the pair tile".
template <QuantFormat F>
void ChunkedDecodeByPairs(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy) {
  const int64_t stride = w.blocks() * w.record_bytes(), m = x.tokens;
  const int64_t chunks = (m + 7) / 8;
  int64_t row = n_begin;
  for (; row + kQuantRows < n_end; row += 2 * kQuantRows) {
    const int64_t rows[2] = {kQuantRows, std::min<int64_t>(n_end - row - kQuantRows, kQuantRows)};
    const uint8_t* g0 = w.group(row / kQuantRows);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t t0 = c * m / chunks, t1 = (c + 1) * m / chunks;
      c == 0 ? ChunkPairTile<F, true>(x, t0, t1 - t0, g0, stride, rows, w.blocks(), y + row, ldy)
             : ChunkPairTile<F, false>(x, t0, t1 - t0, g0, stride, rows, w.blocks(), y + row, ldy);
    }
  }
  if (row < n_end) {  // a lone last group
    QuantTilesOverRows<VnniBlockSums, F, VnniBlockSums::kDecodeTileTokens, 1>(
        x, w, row, n_end, 0, w.blocks(), true, y, ldy);
  }
}

template <QuantFormat F>
bool DecodeByPairs(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                   int64_t n_end, float* y, int64_t ldy) {
  switch (x.tokens) {
    case 3:
      DecodeRowsByPairs<F, 3, 2>(x, w, n_begin, n_end, y, ldy);
      return true;
    case 4:
      DecodeRowsByPairs<F, 4, 2>(x, w, n_begin, n_end, y, ldy);
      return true;
    case 5:
      DecodeRowsByPairs<F, 5, 1>(x, w, n_begin, n_end, y, ldy);
      return true;
    case 6:
      DecodeRowsByPairs<F, 6, 1>(x, w, n_begin, n_end, y, ldy);
      return true;
    case 7:
      DecodeRowsByPairs<F, 7, 1>(x, w, n_begin, n_end, y, ldy);
      return true;
    case 8:
      DecodeRowsByPairs<F, 8, 1>(x, w, n_begin, n_end, y, ldy);
      return true;
    default:
      if (x.tokens < 9) return false;
      ChunkedDecodeByPairs<F>(x, w, n_begin, n_end, y, ldy);
      return true;
  }
}

}  // namespace

void MatmulQuantizedRowsVnni(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  const bool done = w.format() == QuantFormat::kQ8_0
                        ? DecodeByPairs<QuantFormat::kQ8_0>(x, w, n_begin, n_end, y, ldy)
                        : DecodeByPairs<QuantFormat::kQ4_0>(x, w, n_begin, n_end, y, ldy);
  if (!done) QuantizedRows<VnniBlockSums>(x, w, n_begin, n_end, y, ldy);
}

}  // namespace moelab::kernels::internal
