#pragma once

// The fp32-FMA matmul on PackedBf16Matrix storage for ISAs without a bf16 dot product, written once
// over a lane-traits type L and included by each ISA's translation unit (compiled with that ISA's
// flags): AVX2+FMA (8 rows per vector, matmul_avx2.cc) and AVX-512F (16, matmul_avx512f.cc).
// Not a public header.
//
// Lanes are output rows. A packed group's 64-byte vector for pair p holds 16 rows' elements
// (2p, 2p + 1) as dwords, so L::kRows rows' pair is one load; the even elements are the dword
// shifted left by 16 and the odd ones the dword with its low half cleared: exact bf16 -> fp32,
// no shuffles. Each token's element is broadcast and multiplied into one fp32 accumulator per
// output:
//   acc = 0; for k = 0, 1, ..., K-1 in order: acc = fma(x[k], w[k], acc)
// with x[k] the token's element rounded to bf16. The products are exact in fp32, so this is also
// what the scalar path computes (sum += x * w): every ISA of this family gives the same bits, and
// a token's result cannot depend on batch, blocking or thread count (tiles only choose which
// outputs share a vector; k blocks store the accumulators to y and reload them, which is exact).
//
// L provides: V (the fp32 vector), kRows (rows per vector), DecodeVectors(tokens) (row vectors in
// flight in decode), kChunkedDecodeTokens (up to which more than 8 tokens run as chunked decode,
// matmul_internal.h), kTileTokens x kTileVectors (the prefill register tile), kPanelRows, Zero(),
// Even(p), Odd(p) (p: L::kRows pair dwords), Broadcast(const float*), Fma(a, b, c),
// Load/Store(float*, V, rows) (rows < kRows: masked), Prefetch(const char*).

#include <algorithm>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/matmul_internal.h"

namespace moelab::kernels::internal::row_lanes {

constexpr int64_t kGroupRows = 16;                 // PackedBf16Matrix::kGroupRows
constexpr int64_t kPairElements = 2 * kGroupRows;  // bf16 elements per group and pair
constexpr int64_t kAheadBytes = 1024;  // software prefetch distance of the weight streams

// V row vectors of a packed matrix: where each starts (at pair 0) and how many of its rows exist.
template <int V>
struct RowVectors {
  const Bf16* base[V];
  int64_t rows[V];
};

// T tokens (x: row stride ldx, fp32 values exactly representable in bf16) x V row vectors over
// pairs [p_begin, p_end) of k. first: accumulators start at zero, else at y's values. y: T rows
// of stride ldy, column 0 = the first vector's first row. full_pairs = k / 2: a pair at or past it
// is the zero-padded last pair of an odd k (its odd element is skipped, not multiplied by zero).
// kPrefetch is a template argument and the token and vector loops are unrolled before GCC's
// scalar replacement, so the pair loop has no branch and the accumulators live in registers.
template <typename L, int T, int V, bool kPrefetch>
void Tile(const float* x, int64_t ldx, const RowVectors<V>& w, int64_t p_begin, int64_t p_end,
          int64_t full_pairs, bool first, float* y, int64_t ldy) {
  using Vec = typename L::V;
  Vec acc[T][V];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v)
      acc[t][v] = first ? L::Zero() : L::Load(y + t * ldy + v * L::kRows, w.rows[v]);
  }
  const float* xt[T];
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) xt[t] = x + t * ldx;
  const Bf16* wv_at[V];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) wv_at[v] = w.base[v];
  const int64_t full_end = std::min(p_end, full_pairs);
  for (int64_t p = p_begin; p < full_end; ++p) {
    const int64_t e = p * kPairElements;
    if constexpr (kPrefetch) {
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v)
        L::Prefetch(reinterpret_cast<const char*>(wv_at[v] + e) + kAheadBytes);
    }
    Vec wv[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) wv[v] = L::Even(wv_at[v] + e);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const Vec xv = L::Broadcast(xt[t] + 2 * p);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[t][v] = L::Fma(xv, wv[v], acc[t][v]);
    }
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) wv[v] = L::Odd(wv_at[v] + e);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const Vec xv = L::Broadcast(xt[t] + 2 * p + 1);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[t][v] = L::Fma(xv, wv[v], acc[t][v]);
    }
  }
  if (full_end < p_end) {  // odd k: the last element alone
    const int64_t p = full_end;
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      const Vec wv = L::Even(wv_at[v] + p * kPairElements);
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) acc[t][v] = L::Fma(L::Broadcast(xt[t] + 2 * p), wv, acc[t][v]);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) L::Store(y + t * ldy + v * L::kRows, acc[t][v], w.rows[v]);
  }
}

// One tile, prefetching or not.
template <typename L, int T, int V>
void AnyTile(const float* x, int64_t ldx, const RowVectors<V>& w, int64_t p_begin, int64_t p_end,
             int64_t full_pairs, bool first, bool prefetch, float* y, int64_t ldy) {
  if (prefetch) {
    Tile<L, T, V, true>(x, ldx, w, p_begin, p_end, full_pairs, first, y, ldy);
  } else {
    Tile<L, T, V, false>(x, ldx, w, p_begin, p_end, full_pairs, first, y, ldy);
  }
}

// A tile of fewer than T tokens (the batch's last): the same per-output arithmetic, smaller.
template <typename L, int T, int V>
void TailTile(int64_t tokens, const float* x, int64_t ldx, const RowVectors<V>& w, int64_t p_begin,
              int64_t p_end, int64_t full_pairs, bool first, bool prefetch, float* y, int64_t ldy) {
  if constexpr (T > 1) {
    if (tokens == T - 1) {
      AnyTile<L, T - 1, V>(x, ldx, w, p_begin, p_end, full_pairs, first, prefetch, y, ldy);
    } else {
      TailTile<L, T - 1, V>(tokens, x, ldx, w, p_begin, p_end, full_pairs, first, prefetch, y, ldy);
    }
  }
}

// All m tokens over rows [n_begin, n_end) for pairs [p_begin, p_end): tiles of up to T tokens x V
// row vectors, the row remainder in tiles of fewer vectors.
template <typename L, int T, int V>
void TokensOverRows(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t group_elements,
                    int64_t n_begin, int64_t n_end, int64_t p_begin, int64_t p_end, bool prefetch,
                    float* y, int64_t ldy) {
  const int64_t full_pairs = k / 2;
  const bool first = p_begin == 0;
  int64_t row = n_begin;
  for (; row + (V - 1) * L::kRows < n_end; row += V * L::kRows) {
    RowVectors<V> w;
    for (int v = 0; v < V; ++v) {
      const int64_t r = row + v * L::kRows;
      w.base[v] = wp + r / kGroupRows * group_elements + r % kGroupRows * 2;
      w.rows[v] = std::clamp<int64_t>(n_end - r, 0, L::kRows);
    }
    int64_t t = 0;
    for (; t + T <= m; t += T) {
      AnyTile<L, T, V>(x + t * k, k, w, p_begin, p_end, full_pairs, first, prefetch && t == 0,
                       y + t * ldy + row, ldy);
    }
    if (t < m)
      TailTile<L, T, V>(m - t, x + t * k, k, w, p_begin, p_end, full_pairs, first,
                        prefetch && t == 0, y + t * ldy + row, ldy);
  }
  if constexpr (V > 1) {
    if (row < n_end)
      TokensOverRows<L, T, V - 1>(x, m, k, wp, group_elements, row, n_end, p_begin, p_end, prefetch,
                                  y, ldy);
  }
}

// Pairs per k block in prefill: 16 rows x 2 x 2 bytes per pair, so 256 pairs = 16 KB of weights,
// which stay in L1 while every token tile of the batch passes over them.
constexpr int64_t kPrefillBlockPairs = 256;
// Up to this many tokens the weights stream once from DRAM, all tokens in one tile, no k blocks.
constexpr int64_t kDecodeTokens = 8;

// Decode: all T == m tokens in one tile of L::DecodeVectors(T) row vectors, so every weight byte
// is read from DRAM once (prefetched kAheadBytes ahead) and >= 8 accumulators are independent
// (FMA latency x 2 pipes) where the registers allow.
template <typename L, int T>
void DecodeRows(int64_t m, const float* x, int64_t k, const Bf16* wp, int64_t group_elements,
                int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  if (m == T) {
    TokensOverRows<L, L::DecodeTileTokens(T), L::DecodeVectors(T)>(
        x, m, k, wp, group_elements, n_begin, n_end, 0, (k + 1) / 2, true, y, ldy);
  } else if constexpr (T < kDecodeTokens) {
    DecodeRows<L, T + 1>(m, x, k, wp, group_elements, n_begin, n_end, y, ldy);
  }
}

// y rows [0, m) x columns [n_begin, n_end) of x W^T; wp: group 0 of a PackedBf16Matrix with k
// columns; n_begin a multiple of 16.
template <typename L>
void PackedRows(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t n_begin,
                int64_t n_end, float* y, int64_t ldy) {
  const int64_t pairs = (k + 1) / 2;
  const int64_t group_elements = pairs * kPairElements;
  if (m <= kDecodeTokens) {
    DecodeRows<L, 1>(m, x, k, wp, group_elements, n_begin, n_end, y, ldy);
    return;
  }
  if (m <= L::kChunkedDecodeTokens) {  // matmul_internal.h: ForChunkedDecode
    ForChunkedDecode(m, k, n_begin, n_end, kDecodeTokens,
                     [&](int64_t t, int64_t tokens, int64_t row, int64_t row_end) {
                       DecodeRows<L, 1>(tokens, x + t * k, k, wp, group_elements, row, row_end,
                                        y + t * ldy, ldy);
                     });
    return;
  }
  // Prefill: panels of L::kPanelRows rows, k blocks of kPrefillBlockPairs whose weights stay in L1
  // while every L::kTileTokens-token tile passes over them.
  for (int64_t row = n_begin; row < n_end; row += L::kPanelRows) {
    const int64_t row_end = std::min(n_end, row + L::kPanelRows);
    for (int64_t p = 0; p < pairs; p += kPrefillBlockPairs) {
      TokensOverRows<L, L::kTileTokens, L::kTileVectors>(x, m, k, wp, group_elements, row, row_end,
                                                         p, std::min(pairs, p + kPrefillBlockPairs),
                                                         false, y, ldy);
    }
  }
}

}  // namespace moelab::kernels::internal::row_lanes
