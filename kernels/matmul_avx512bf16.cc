// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; only called when the CPU has them.
//
// Every output y[i][j] is computed as: 16 fp32 lanes start at zero; for each 32-element chunk of
// k in order, one vdpbf16ps adds x[i][chunk] . w[j][chunk] pairwise into the lanes (the last chunk
// masked); then the lanes are summed in a fixed order (ReduceAdd). The blocked path below stores the
// lanes in scratch between k blocks, which changes nothing in that sequence, so both paths give
// bit-identical results for a token whatever the batch it is in.
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_internal.h"

namespace moelab::kernels_internal {
namespace {

constexpr int64_t kChunk = 32;            // bf16 elements per vdpbf16ps
constexpr int64_t kBlockK = 512;          // k block of the blocked path (1 KB of a weight row)
constexpr int64_t kBlockTokens = 128;     // tokens whose x block stays in L2
constexpr int64_t kBlockRows = 32;        // weight rows whose k block stays in L1
constexpr int64_t kSmallM = 8;            // up to this many tokens: full k in registers

// Sum of the 16 lanes in a fixed pairwise order. (GCC 12's reduce/shuffle intrinsics trip
// -Wuninitialized inside its own header, so the lanes go through memory.)
inline float ReduceAdd(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  for (int width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
  }
  return lane[0];
}

inline __m512bh Load(const Bf16* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

inline __m512bh LoadMasked(const Bf16* p, __mmask32 mask) {
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, p));
}

// Runs chunks [k_begin, k_end) of a T x R tile into acc (k_end may end in a partial chunk only
// when it equals k).
template <int T, int R>
inline void TileChunks(const Bf16* x, int64_t ldx, const Bf16* w, int64_t ldw, int64_t k_begin,
                       int64_t k_end, __m512 (&acc)[T][R]) {
  int64_t kk = k_begin;
  for (; kk + kChunk <= k_end; kk += kChunk) {
    __m512bh xv[T];
    for (int t = 0; t < T; ++t) xv[t] = Load(x + t * ldx + kk);
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = Load(w + r * ldw + kk);
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_dpbf16_ps(acc[t][r], xv[t], wv);
    }
  }
  if (kk < k_end) {
    const __mmask32 mask = (k_end - kk) >= 32 ? ~__mmask32{0} : ((__mmask32{1} << (k_end - kk)) - 1);
    __m512bh xv[T];
    for (int t = 0; t < T; ++t) xv[t] = LoadMasked(x + t * ldx + kk, mask);
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = LoadMasked(w + r * ldw + kk, mask);
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_dpbf16_ps(acc[t][r], xv[t], wv);
    }
  }
}

// Full k in registers: the decode path (weights streamed from memory once).
template <int T, int R>
inline void TileFullK(const Bf16* x, int64_t k, const Bf16* w, float* y, int64_t ldy) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  TileChunks<T, R>(x, k, w, k, 0, k, acc);
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) y[t * ldy + r] = ReduceAdd(acc[t][r]);
  }
}

template <int T>
void SmallRows(const Bf16* x, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end, float* y,
               int64_t ldy) {
  int64_t j = n_begin;
  for (; j + 4 <= n_end; j += 4) {
    // Prefetch the next rows' first lines so the DRAM stream stays busy across row switches.
    if (j + 4 < n_end) {
      for (int r = 0; r < 4; ++r) _mm_prefetch(reinterpret_cast<const char*>(w + (j + 4 + r) * k), _MM_HINT_T0);
    }
    TileFullK<T, 4>(x, k, w + j * k, y + j, ldy);
  }
  for (; j < n_end; ++j) TileFullK<T, 1>(x, k, w + j * k, y + j, ldy);
}

// Blocked tile: lanes kept in scratch across k blocks.
template <int T, int R>
inline void TileBlock(const Bf16* x, int64_t k, const Bf16* w, int64_t k_begin, int64_t k_end,
                      __m512* lanes /* [T][R] with row stride 4 */) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_load_ps(lanes + t * 4 + r);
  }
  TileChunks<T, R>(x, k, w, k, k_begin, k_end, acc);
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) _mm512_store_ps(lanes + t * 4 + r, acc[t][r]);
  }
}

template <int T>
void BlockTokens(const Bf16* x, int64_t k, const Bf16* w, int64_t rows, int64_t k_begin,
                 int64_t k_end, __m512* lanes) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) TileBlock<T, 4>(x, k, w + r * k, k_begin, k_end, lanes + r * 4);
  // A partial group of rows keeps the group's layout: row q of the group at offset q.
  for (; r < rows; ++r) TileBlock<T, 1>(x, k, w + r * k, k_begin, k_end, lanes + (r / 4 * 4) * 4 + r % 4);
}

void BlockedRows(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy, __m512* scratch) {
  for (int64_t j0 = n_begin; j0 < n_end; j0 += kBlockRows) {
    const int64_t rows = std::min(kBlockRows, n_end - j0);
    const int64_t padded_rows = (rows + 3) / 4 * 4;
    for (int64_t i0 = 0; i0 < m; i0 += kBlockTokens) {
      const int64_t tokens = std::min(kBlockTokens, m - i0);
      // Lanes of token block tb, row r: scratch[(tb * padded_rows + r) * 4 + t].
      const int64_t token_blocks = (tokens + 3) / 4;
      for (int64_t v = 0; v < token_blocks * padded_rows * 4; ++v) scratch[v] = _mm512_setzero_ps();
      for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
        const int64_t k1 = std::min(k, k0 + kBlockK);
        for (int64_t tb = 0; tb < token_blocks; ++tb) {
          const Bf16* xb = x + (i0 + tb * 4) * k;
          __m512* lanes = scratch + tb * padded_rows * 4;
          // Lanes laid out [row][token] in groups of 4 rows: index r * 4 + t within the group.
          switch (std::min<int64_t>(4, tokens - tb * 4)) {
            case 4: BlockTokens<4>(xb, k, w + j0 * k, rows, k0, k1, lanes); break;
            case 3: BlockTokens<3>(xb, k, w + j0 * k, rows, k0, k1, lanes); break;
            case 2: BlockTokens<2>(xb, k, w + j0 * k, rows, k0, k1, lanes); break;
            default: BlockTokens<1>(xb, k, w + j0 * k, rows, k0, k1, lanes); break;
          }
        }
      }
      for (int64_t tb = 0; tb < token_blocks; ++tb) {
        const int64_t block_tokens = std::min<int64_t>(4, tokens - tb * 4);
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t group = r / 4 * 4;  // lanes of rows [group, group + 4)
          for (int64_t t = 0; t < block_tokens; ++t) {
            const __m512 lane = scratch[tb * padded_rows * 4 + group * 4 + t * 4 + (r - group)];
            y[(i0 + tb * 4 + t) * ldy + j0 + r] = ReduceAdd(lane);
          }
        }
      }
    }
  }
}

}  // namespace

void MatmulRowsAvx512Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy, void* scratch) {
  if (m > kSmallM) {
    BlockedRows(x, m, k, w, n_begin, n_end, y, ldy, static_cast<__m512*>(scratch));
    return;
  }
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) SmallRows<4>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy);
  switch (m - i) {
    case 3: SmallRows<3>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy); break;
    case 2: SmallRows<2>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy); break;
    case 1: SmallRows<1>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy); break;
    default: break;
  }
}

}  // namespace moelab::kernels_internal
