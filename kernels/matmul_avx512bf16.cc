// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; only called when the CPU has them.
//
// Every output y[i][j] is computed the same way: 16 fp32 lanes start at zero; for each 32-element
// chunk of k in order, one vdpbf16ps adds x[i][chunk] . w[j][chunk] pairwise into the lanes (the
// last chunk masked); then the 16 lanes are summed by a fixed tree (lanes at distance 8, then 4,
// 2, 1). Tiles of 4 tokens x 4 rows sum their 16 vectors at once with a transposing tree that
// performs exactly the same additions per output, so a token's result is bit-identical whatever
// batch it is in (speculative verification relies on this).
//
// Blocking: a panel of kPanelRows weight rows (full k) stays in L2 while every block of 4 tokens
// runs over it in 4 x 4 register tiles; each weight byte comes from DRAM once per call.
#include <immintrin.h>

#include <algorithm>

#include "kernels/matmul_internal.h"

namespace moelab::kernels_internal {
namespace {

constexpr int64_t kChunk = 32;       // bf16 elements per vdpbf16ps
constexpr int64_t kPanelRows = 32;   // weight rows per L2 panel
constexpr int64_t kPrefetchBytes = 1024;

// Sum of one vector's 16 lanes: (l_i + l_i+8), then distance 4, 2, 1.
inline float ReduceAdd(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  for (int width = 8; width >= 1; width /= 2) {
    for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
  }
  return lane[0];
}

// a and b interleaved through two index vectors and added: one stage of the transposing tree.
inline __m512 Combine(__m512 a, __m512 b, __m512i low, __m512i high) {
  return _mm512_add_ps(_mm512_permutex2var_ps(a, low, b), _mm512_permutex2var_ps(a, high, b));
}

// Lane 4 * q + m of the result is the sum of v[4 * m + q], with ReduceAdd's exact additions.
inline __m512 Reduce16(const __m512 (&v)[16]) {
  const __m512i s1_low = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
  const __m512i s1_high = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const __m512i s2_low = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
  const __m512i s2_high = _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const __m512i s3_low = _mm512_setr_epi32(0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
  const __m512i s3_high = _mm512_setr_epi32(2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
  const __m512i s4_low = _mm512_setr_epi32(0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30);
  const __m512i s4_high = _mm512_setr_epi32(1, 3, 17, 19, 5, 7, 21, 23, 9, 11, 25, 27, 13, 15, 29, 31);
  __m512 t[8], u[4], w[2];
  for (int i = 0; i < 8; ++i) t[i] = Combine(v[2 * i], v[2 * i + 1], s1_low, s1_high);
  for (int i = 0; i < 4; ++i) u[i] = Combine(t[2 * i], t[2 * i + 1], s2_low, s2_high);
  for (int i = 0; i < 2; ++i) w[i] = Combine(u[2 * i], u[2 * i + 1], s3_low, s3_high);
  return Combine(w[0], w[1], s4_low, s4_high);
}

inline __m512bh Load(const Bf16* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

inline __m512bh LoadMasked(const Bf16* p, __mmask32 mask) {
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(mask, p));
}

// Runs chunks [k_begin, k_end) of a T-token x R-row tile into acc; k_end is a multiple of 32
// or k itself (the masked tail). Prefetch runs ahead in the weight rows when a few tokens share
// each weight load (the out-of-order window alone then covers too few DRAM misses).
template <int T, int R, bool kPrefetch>
inline void TileChunks(const Bf16* x, int64_t k, const Bf16* w, int64_t k_begin, int64_t k_end,
                       __m512 (&acc)[T][R]) {
  int64_t kk = k_begin;
  for (; kk + kChunk <= k_end; kk += kChunk) {
    if constexpr (kPrefetch) {
      for (int r = 0; r < R; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(w + r * k + kk) + kPrefetchBytes, _MM_HINT_T0);
      }
    }
    __m512bh xv[T];
    for (int t = 0; t < T; ++t) xv[t] = Load(x + t * k + kk);
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = Load(w + r * k + kk);
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_dpbf16_ps(acc[t][r], xv[t], wv);
    }
  }
  if (kk < k_end) {
    const __mmask32 mask = (__mmask32{1} << (k_end - kk)) - 1;
    __m512bh xv[T];
    for (int t = 0; t < T; ++t) xv[t] = LoadMasked(x + t * k + kk, mask);
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = LoadMasked(w + r * k + kk, mask);
      for (int t = 0; t < T; ++t) acc[t][r] = _mm512_dpbf16_ps(acc[t][r], xv[t], wv);
    }
  }
}

// Sums each of the tile's lane vectors into y[t][r]: 16 at a time with the transposing tree
// (zero-padded), or one by one; both perform the same additions per output.
template <int T, int R>
inline void StoreSums(const __m512 (&acc)[T][R], float* y, int64_t ldy) {
  if constexpr (T * R >= 8) {
    constexpr int kVectors = T * R;
    for (int base = 0; base < kVectors; base += 16) {
      __m512 v[16];
      for (int i = 0; i < 16; ++i) {
        const int index = base + i;
        v[i] = index < kVectors ? acc[index / R][index % R] : _mm512_setzero_ps();
      }
      alignas(64) float sums[16];
      _mm512_store_ps(sums, Reduce16(v));
      for (int i = 0; i < 16 && base + i < kVectors; ++i) {
        const int index = base + i;
        y[(index / R) * ldy + index % R] = sums[4 * (i % 4) + i / 4];
      }
    }
  } else {
    for (int t = 0; t < T; ++t) {
      for (int r = 0; r < R; ++r) y[t * ldy + r] = ReduceAdd(acc[t][r]);
    }
  }
}

// A T-token x R-row tile over the full k, in registers, summed into y.
template <int T, int R, bool kPrefetch>
inline void Tile(const Bf16* x, int64_t k, const Bf16* w, float* y, int64_t ldy) {
  __m512 acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = _mm512_setzero_ps();
  }
  TileChunks<T, R, kPrefetch>(x, k, w, 0, k, acc);
  StoreSums<T, R>(acc, y, ldy);
}

// T tokens over a panel of rows in R-row tiles (a remainder in 1-row tiles).
template <int T, bool kPrefetch, int R = 4>
void TokensOverPanel(const Bf16* x, int64_t k, const Bf16* w, int64_t rows, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + R <= rows; r += R) Tile<T, R, kPrefetch>(x, k, w + r * k, y + r, ldy);
  for (; r < rows; ++r) Tile<T, 1, kPrefetch>(x, k, w + r * k, y + r, ldy);
}

template <bool kPrefetch>
void Panels(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end, float* y,
            int64_t ldy) {
  for (int64_t j0 = n_begin; j0 < n_end; j0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, n_end - j0);
    const Bf16* panel = w + j0 * k;
    int64_t i = 0;
    if (m > 8) {
      for (; i + 6 <= m; i += 6) TokensOverPanel<6, kPrefetch>(x + i * k, k, panel, rows, y + i * ldy + j0, ldy);
    }
    for (; i + 4 <= m; i += 4) TokensOverPanel<4, kPrefetch>(x + i * k, k, panel, rows, y + i * ldy + j0, ldy);
    switch (m - i) {
      case 3: TokensOverPanel<3, kPrefetch>(x + i * k, k, panel, rows, y + i * ldy + j0, ldy); break;
      case 2: TokensOverPanel<2, kPrefetch>(x + i * k, k, panel, rows, y + i * ldy + j0, ldy); break;
      case 1: TokensOverPanel<1, kPrefetch>(x + i * k, k, panel, rows, y + i * ldy + j0, ldy); break;
      default: break;
    }
  }
}

// Decode with 5..8 tokens: both token blocks run over each 4-row group while it is in L1, so the
// weights stream from DRAM without pauses for a second pass.
template <int Tail>
void DecodeRowGroups(const Bf16* x, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end, float* y,
                     int64_t ldy) {
  int64_t j = n_begin;
  for (; j + 4 <= n_end; j += 4) {
    Tile<4, 4, true>(x, k, w + j * k, y + j, ldy);
    Tile<Tail, 4, false>(x + 4 * k, k, w + j * k, y + 4 * ldy + j, ldy);
  }
  for (; j < n_end; ++j) {
    Tile<4, 1, false>(x, k, w + j * k, y + j, ldy);
    Tile<Tail, 1, false>(x + 4 * k, k, w + j * k, y + 4 * ldy + j, ldy);
  }
}

// Long rows (large k) do not leave room in L1 for a token block's activations, so k is cut into
// kBlockK slices; a tile's lanes wait in `lanes` between slices (exact: the same additions in the
// same order). Tokens go in macro blocks of kMacroTokens so their lanes stay in L2.
constexpr int64_t kBlockK = 1024;
constexpr int64_t kMacroTokens = 96;
constexpr int64_t kBlockTokens = 6;

template <int T>
void SliceOverPanel(const Bf16* x, int64_t k, const Bf16* w, int64_t rows, int64_t k0, int64_t k1, __m512* lanes) {
  // lanes: per 4-row group, T x 4 vectors ([t][r]); a partial last group uses R = 1 tiles.
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    __m512 acc[T][4];
    __m512* group = lanes + r / 4 * T * 4;
    for (int t = 0; t < T; ++t) {
      for (int q = 0; q < 4; ++q) acc[t][q] = _mm512_load_ps(reinterpret_cast<const float*>(group + t * 4 + q));
    }
    TileChunks<T, 4, false>(x, k, w + r * k, k0, k1, acc);
    for (int t = 0; t < T; ++t) {
      for (int q = 0; q < 4; ++q) _mm512_store_ps(reinterpret_cast<float*>(group + t * 4 + q), acc[t][q]);
    }
  }
  for (; r < rows; ++r) {
    __m512 acc[T][1];
    __m512* group = lanes + r / 4 * T * 4 + (r % 4);
    for (int t = 0; t < T; ++t) acc[t][0] = _mm512_load_ps(reinterpret_cast<const float*>(group + t * 4));
    TileChunks<T, 1, false>(x, k, w + r * k, k0, k1, acc);
    for (int t = 0; t < T; ++t) _mm512_store_ps(reinterpret_cast<float*>(group + t * 4), acc[t][0]);
  }
}

template <int T>
void SumLanes(const __m512* lanes, int64_t rows, float* y, int64_t ldy) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    __m512 acc[T][4];
    const __m512* group = lanes + r / 4 * T * 4;
    for (int t = 0; t < T; ++t) {
      for (int q = 0; q < 4; ++q) acc[t][q] = group[t * 4 + q];
    }
    StoreSums<T, 4>(acc, y + r, ldy);
  }
  for (; r < rows; ++r) {
    __m512 acc[T][1];
    const __m512* group = lanes + r / 4 * T * 4 + (r % 4);
    for (int t = 0; t < T; ++t) acc[t][0] = group[t * 4];
    StoreSums<T, 1>(acc, y + r, ldy);
  }
}

void BlockedPanels(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end, float* y,
                   int64_t ldy, __m512* scratch) {
  const int64_t lanes_per_block = (kPanelRows / 4) * kBlockTokens * 4;
  for (int64_t j0 = n_begin; j0 < n_end; j0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, n_end - j0);
    const Bf16* panel = w + j0 * k;
    for (int64_t i0 = 0; i0 < m; i0 += kMacroTokens) {
      const int64_t i1 = std::min(m, i0 + kMacroTokens);
      // Every token block of the macro block over one k slice, then the next slice.
      const int64_t blocks = (i1 - i0 + kBlockTokens - 1) / kBlockTokens;
      for (int64_t b = 0; b < blocks * lanes_per_block; ++b) scratch[b] = _mm512_setzero_ps();
      for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
        const int64_t k1 = std::min(k, k0 + kBlockK);
        for (int64_t b = 0; b < blocks; ++b) {
          const int64_t i = i0 + b * kBlockTokens;
          __m512* lanes = scratch + b * lanes_per_block;
          switch (std::min(kBlockTokens, i1 - i)) {
            case 6: SliceOverPanel<6>(x + i * k, k, panel, rows, k0, k1, lanes); break;
            case 5: SliceOverPanel<5>(x + i * k, k, panel, rows, k0, k1, lanes); break;
            case 4: SliceOverPanel<4>(x + i * k, k, panel, rows, k0, k1, lanes); break;
            case 3: SliceOverPanel<3>(x + i * k, k, panel, rows, k0, k1, lanes); break;
            case 2: SliceOverPanel<2>(x + i * k, k, panel, rows, k0, k1, lanes); break;
            default: SliceOverPanel<1>(x + i * k, k, panel, rows, k0, k1, lanes); break;
          }
        }
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t i = i0 + b * kBlockTokens;
        const __m512* lanes = scratch + b * lanes_per_block;
        float* out = y + i * ldy + j0;
        switch (std::min(kBlockTokens, i1 - i)) {
          case 6: SumLanes<6>(lanes, rows, out, ldy); break;
          case 5: SumLanes<5>(lanes, rows, out, ldy); break;
          case 4: SumLanes<4>(lanes, rows, out, ldy); break;
          case 3: SumLanes<3>(lanes, rows, out, ldy); break;
          case 2: SumLanes<2>(lanes, rows, out, ldy); break;
          default: SumLanes<1>(lanes, rows, out, ldy); break;
        }
      }
    }
  }
}

}  // namespace

void ConvertToBf16Avx512(const float* in, int64_t count, Bf16* out) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512bh packed = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(packed));
  }
  for (; i < count; ++i) out[i] = FloatToBf16(in[i]);
}

int64_t Avx512ScratchBytes() {
  return (kMacroTokens + kBlockTokens - 1) / kBlockTokens * (kPanelRows / 4) * kBlockTokens * 4 * 64;
}

void MatmulRowsAvx512Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy, void* scratch) {
  if (m > 8 && k > 1536) {
    BlockedPanels(x, m, k, w, n_begin, n_end, y, ldy, static_cast<__m512*>(scratch));
  } else if (m >= 5 && m <= 8) {
    switch (m) {
      case 8: DecodeRowGroups<4>(x, k, w, n_begin, n_end, y, ldy); break;
      case 7: DecodeRowGroups<3>(x, k, w, n_begin, n_end, y, ldy); break;
      case 6: DecodeRowGroups<2>(x, k, w, n_begin, n_end, y, ldy); break;
      default: DecodeRowGroups<1>(x, k, w, n_begin, n_end, y, ldy); break;
    }
  } else if (m >= 2 && m <= 4) {
    Panels<true>(x, m, k, w, n_begin, n_end, y, ldy);
  } else {
    Panels<false>(x, m, k, w, n_begin, n_end, y, ldy);
  }
}

}  // namespace moelab::kernels_internal
