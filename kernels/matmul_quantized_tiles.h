#pragma once

// The quantized matmul's register tiles (kernels/quantized_matrix.h layout, lanes are 8 output rows
// in a 256-bit vector), written once over a block-sums type S and included by each integer-dot
// ISA's translation unit, compiled with that ISA's flags: AVX2 (vpmaddubsw + vpmaddwd,
// matmul_quantized_avx2.cc) and AVX-512 VNNI (vpdpbusd on 256-bit vectors with 32 registers,
// matmul_quantized_vnni.cc). Not a public header.
//
// Everything here is in an anonymous namespace on purpose: each ISA's file gets its own copy
// compiled with its own flags, so the linker can never merge an AVX-512 instance of a helper into
// the AVX2 path (an inline function with external linkage would be one symbol for both).
//
// Per output and k block b, S computes the block's exact int32 dot product of the quants; the tile
// then adds fma(d_w * d_x, float(sum), acc) in block order. Integer sums are exact whatever the
// instructions, so every S gives the same bits as the scalar reference, whatever the batch, tile
// or thread count.
//
// S provides: template <QuantFormat F, int T, int G> BlockSums(record, xq, xs, b, sum) (sum[t][g]:
// 8 rows' int32 sums of block b for token t and group g), kDecodeAheadBytes (the decode tiles'
// prefetch distance), and the tile shapes: Decode1Groups (1
// token), Decode2Groups (2 tokens), kDecodeTileTokens x kDecodeTileGroups (3 to kDecodeMaxTokens),
// kPrefillTokens x kPrefillGroups over kPrefillBlocks k blocks (more tokens).

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/quantized_activations.h"
#include "kernels/quantized_matrix.h"

namespace moelab::kernels::internal {
namespace {

constexpr int64_t kQuantRows = QuantizedMatrix::kGroupRows;
// Software prefetch distance of the weight streams (the tiles take S::kDecodeAheadBytes).
constexpr int64_t kQuantAheadBytes = 1024;

inline __m256i RowMask(int64_t rows) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rows)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Four consecutive activation quants, in every dword.
inline __m256i BroadcastQuad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

// Quant vector v of a k block's record (after its 16 bytes of scales): 8 rows x 4 bytes.
inline __m256i LoadQuants(const uint8_t* record, int v) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + 16 + 32 * v));
}

// q4_0's vector v as unsigned bytes in [0, 15]: lo holds elements 4v + i, hi elements 16 + 4v + i.
inline void Q4Nibbles(const uint8_t* record, int v, __m256i& lo, __m256i& hi) {
  const __m256i nibble = _mm256_set1_epi8(0x0f), raw = LoadQuants(record, v);
  lo = _mm256_and_si256(raw, nibble);
  hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), nibble);
}

template <int T, int G>
inline void ZeroSums(__m256i (&v)[T][G]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) v[t][g] = _mm256_setzero_si256();
  }
}

// The activations a tile reads: token t's quants, scales and quant sums (all blocks).
template <int T>
struct TileActivations {
  const int8_t* quants[T];
  const float* scales[T];
  const int32_t* sums[T];
};

// T tokens (from t0) x G groups over k blocks [b_begin, b_end). g0: the first group's record 0;
// groups are `group_stride` bytes apart; rows[g]: valid rows of group g. first: start at zero, else
// at y.
template <typename S, QuantFormat F, int T, int G, bool kPrefetch>
void QuantTile(const QuantizedActivations& x, int64_t t0, const uint8_t* g0, int64_t group_stride,
               const int64_t (&rows)[G], int64_t b_begin, int64_t b_end, bool first, float* y,
               int64_t ldy) {
  constexpr int64_t kRecord = QuantizedMatrix::RecordBytes(F);
  TileActivations<T> a;
  __m256 acc[T][G];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    a.quants[t] = x.token_quants(t0 + t);
    a.scales[t] = x.token_scales(t0 + t);
    a.sums[t] = x.token_sums(t0 + t);
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      acc[t][g] = first ? _mm256_setzero_ps()
                        : _mm256_maskload_ps(y + t * ldy + g * kQuantRows, RowMask(rows[g]));
    }
  }
  for (int64_t b = b_begin; b < b_end; ++b) {
    // Past its group's end a stream is prefetched at the same group of the next tile, G groups on:
    // the bytes right after a group are this tile's next group, already being read, and a tile's
    // streams are short (k = 1024: q8_0 8.7 KB, q4_0 4.6 KB), so without it every tile started its
    // G streams cold (measured: kernels/README.md, "Decode prefetch").
    // Decided per record for all its lines: at the seam, one record's lines may go to the next
    // group.
    int64_t ahead = b * kRecord + S::kDecodeAheadBytes;
    if (ahead >= group_stride) ahead += (G - 1) * group_stride;
    const uint8_t* record[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      record[g] = g0 + g * group_stride + b * kRecord;
      if constexpr (kPrefetch) {
        for (int64_t line = 0; line < kRecord; line += 64)
          _mm_prefetch(reinterpret_cast<const char*>(g0 + g * group_stride + ahead + line),
                       _MM_HINT_T0);
      }
    }
    __m256i sum[T][G];
    S::template BlockSums<F, T, G>(record, a, b, sum);
    __m256 scale[G];
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g)
      scale[g] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record[g])));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m256 dx = _mm256_broadcast_ss(a.scales[t] + b);
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
      _mm256_maskstore_ps(y + t * ldy + g * kQuantRows, RowMask(rows[g]), acc[t][g]);
  }
}

// A last tile of `tokens` < T tokens: the same per-output arithmetic, smaller.
template <typename S, QuantFormat F, int T, int G>
void QuantTailTile(int64_t tokens, const QuantizedActivations& x, int64_t t0, const uint8_t* g0,
                   int64_t group_stride, const int64_t (&rows)[G], int64_t b_begin, int64_t b_end,
                   bool first, float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tokens == T - 1) {
      QuantTile<S, F, T - 1, G, false>(x, t0, g0, group_stride, rows, b_begin, b_end, first, y,
                                       ldy);
    } else {
      QuantTailTile<S, F, T - 1, G>(tokens, x, t0, g0, group_stride, rows, b_begin, b_end, first, y,
                                    ldy);
    }
  }
}

template <typename S, QuantFormat F, int T, int G>
void QuantTilesOverRows(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                        int64_t n_end, int64_t b_begin, int64_t b_end, bool prefetch, float* y,
                        int64_t ldy) {
  const int64_t stride = w.blocks() * w.record_bytes(), m = x.tokens;
  int64_t row = n_begin;
  for (; row + (G - 1) * kQuantRows < n_end; row += G * kQuantRows) {
    int64_t rows[G];
    for (int g = 0; g < G; ++g)
      rows[g] = std::clamp<int64_t>(n_end - row - g * kQuantRows, 0, kQuantRows);
    const uint8_t* g0 = w.group(row / kQuantRows);
    for (int64_t t = 0; t < m; t += T) {
      const int64_t tokens = std::min<int64_t>(T, m - t);
      const bool first = b_begin == 0, ahead = prefetch && t == 0;
      float* yt = y + t * ldy + row;
      if (tokens == T) {
        ahead
            ? QuantTile<S, F, T, G, true>(x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy)
            : QuantTile<S, F, T, G, false>(x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy);
      } else {
        QuantTailTile<S, F, T, G>(tokens, x, t, g0, stride, rows, b_begin, b_end, first, yt, ldy);
      }
    }
  }
  if constexpr (G > 1) {
    if (row < n_end)
      QuantTilesOverRows<S, F, T, G - 1>(x, w, row, n_end, b_begin, b_end, prefetch, y, ldy);
  }
}

template <typename S, QuantFormat F>
void QuantizedRowsOver(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                       int64_t n_end, float* y, int64_t ldy) {
  const int64_t blocks = w.blocks();
  switch (x.tokens) {
    case 1:
      QuantTilesOverRows<S, F, 1, S::kDecode1Groups>(x, w, n_begin, n_end, 0, blocks, true, y, ldy);
      return;
    case 2:
      QuantTilesOverRows<S, F, 2, S::kDecode2Groups>(x, w, n_begin, n_end, 0, blocks, true, y, ldy);
      return;
    default:
      break;
  }
  // Decode: one pass over the weights (later token tiles read them from L1).
  if (x.tokens <= S::kDecodeMaxTokens) {
    QuantTilesOverRows<S, F, S::kDecodeTileTokens, S::kDecodeTileGroups>(x, w, n_begin, n_end, 0,
                                                                         blocks, true, y, ldy);
    return;
  }
  constexpr int64_t kPanelRows = S::kPrefillGroups * kQuantRows;
  for (int64_t row = n_begin; row < n_end; row += kPanelRows) {
    for (int64_t b = 0; b < blocks; b += S::kPrefillBlocks) {
      QuantTilesOverRows<S, F, S::kPrefillTokens, S::kPrefillGroups>(
          x, w, row, std::min(n_end, row + kPanelRows), b, std::min(blocks, b + S::kPrefillBlocks),
          false, y, ldy);
    }
  }
}

// Both formats, dispatched on the matrix's.
template <typename S>
void QuantizedRows(const QuantizedActivations& x, const QuantizedMatrix& w, int64_t n_begin,
                   int64_t n_end, float* y, int64_t ldy) {
  if (w.format() == QuantFormat::kQ8_0) {
    QuantizedRowsOver<S, QuantFormat::kQ8_0>(x, w, n_begin, n_end, y, ldy);
  } else {
    QuantizedRowsOver<S, QuantFormat::kQ4_0>(x, w, n_begin, n_end, y, ldy);
  }
}

}  // namespace
}  // namespace moelab::kernels::internal
