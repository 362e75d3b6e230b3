// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16; only called when the CPU has them.
//
// Every output y[i][j] is computed the same way: one fp32 accumulator starts at zero and, for each
// pair p = 0, 1, ... of k in order, one vdpbf16ps lane adds x[i][2p] * w[j][2p] and
// x[i][2p+1] * w[j][2p+1] (for odd k the last pair's second element is zero in both). No lane
// sums follow, so the two paths differ only in which outputs share a vector:
//   decode (m <= kDecodeTokens): lanes are 16 output rows. 16 weight rows are loaded 32 elements
//     at a time and transposed into 16 pair vectors; each token's pair is broadcast. The weights
//     stream from DRAM once, the next rows prefetched as one sequential stream.
//   prefill: lanes are 16 tokens, packed pair-major once per call (PackTokenPairsAvx512); each
//     weight pair is broadcast. Register tiles of up to 64 tokens x 6 rows run over 48-row panels
//     that stay in L2; no lane reductions, so the tile is pure vdpbf16ps.
// Weights come row-major or as a PackedBf16Matrix (16-row groups, one 64-byte vector per group and
// pair). Packed decode needs no transpose: it broadcasts each token's pair and multiplies one
// aligned vector, with several row groups in flight so the accumulator chains overlap; packed
// prefill only reads its broadcast weight pairs from other addresses. Both perform the same
// additions in the same order per output, so a token's result is bit-identical whatever batch it is
// in (speculative verification relies on this). GCC 12 reports its own intrinsics' deliberately
// undefined pass-through operands (bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "kernels/matmul_internal.h"

namespace moelab::kernels::internal {
namespace {

constexpr int64_t kLanes = kAvx512Bf16PrefillTokenLanes;
constexpr int64_t kChunk = 32;        // bf16 elements (16 pairs) per transposed load
constexpr int64_t kPanelRows = 48;    // weight rows per L2 panel (prefill)
constexpr int64_t kBlockVectors = 4;  // token vectors per prefill register tile (64 tokens)

// In-place 16 x 16 transpose of 32-bit elements: v[i] lane l <- old v[l] lane i.
inline void Transpose16(__m512i (&v)[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 16; i += 2) {
    a[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
    a[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
    b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
    b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
    b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
  }
  // Quarter s of b[4q + r] is column 4s + r of rows 4q..4q+3; the two 128-bit shuffle stages move
  // quarter s of b[4q + r] to quarter q of v[4s + r].
  for (int i = 0; i < 4; ++i) {
    a[i] = _mm512_shuffle_i32x4(b[i], b[i + 4], 0x88);
    a[i + 4] = _mm512_shuffle_i32x4(b[i], b[i + 4], 0xdd);
    a[i + 8] = _mm512_shuffle_i32x4(b[i + 8], b[i + 12], 0x88);
    a[i + 12] = _mm512_shuffle_i32x4(b[i + 8], b[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm512_shuffle_i32x4(a[i], a[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_i32x4(a[i], a[i + 8], 0xdd);
    v[i + 4] = _mm512_shuffle_i32x4(a[i + 4], a[i + 12], 0x88);
    v[i + 12] = _mm512_shuffle_i32x4(a[i + 4], a[i + 12], 0xdd);
  }
}

// Elements [kk, kk + 32) of 16 rows as 16 pair vectors: out[p] lane i = pair p of row i. Quarter q
// of each gathered vector comes straight from row 4q + i by a (masked) 128-bit broadcast load, so
// only the in-quarter 4 x 4 transposes use the shuffle unit (half of Transpose16's shuffles).
inline void LoadTransposed(const Bf16* const (&row)[16], int64_t kk, __m512i (&out)[16]) {
  for (int s = 0; s < 4; ++s) {
    __m512i a[4];
    for (int i = 0; i < 4; ++i) {
      const auto piece = [&](int q) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[4 * q + i] + kk + 8 * s));
      };
      a[i] = _mm512_castsi128_si512(piece(0));
      a[i] = _mm512_mask_broadcast_i32x4(a[i], 0x00f0, piece(1));
      a[i] = _mm512_mask_broadcast_i32x4(a[i], 0x0f00, piece(2));
      a[i] = _mm512_mask_broadcast_i32x4(a[i], 0xf000, piece(3));
    }
    const __m512i b0 = _mm512_unpacklo_epi32(a[0], a[1]), b1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const __m512i b2 = _mm512_unpacklo_epi32(a[2], a[3]), b3 = _mm512_unpackhi_epi32(a[2], a[3]);
    out[4 * s] = _mm512_unpacklo_epi64(b0, b2);
    out[4 * s + 1] = _mm512_unpackhi_epi64(b0, b2);
    out[4 * s + 2] = _mm512_unpacklo_epi64(b1, b3);
    out[4 * s + 3] = _mm512_unpackhi_epi64(b1, b3);
  }
}

inline __m512bh AsBh(__m512i v) { return reinterpret_cast<__m512bh>(v); }

// The pair starting at element e of a row, broadcast to all lanes (a vector load from memory:
// through a general register it would cost a scarce register-to-vector transfer).
inline __m512i BroadcastPair(const Bf16* row, int64_t e) {
  return _mm512_broadcastd_epi32(_mm_loadu_si32(row + e));
}

// The last pair of an odd-length row: its element and a zero.
inline __m512i BroadcastLastOdd(const Bf16* row, int64_t e) {
  return _mm512_set1_epi32(static_cast<int32_t>(row[e]));
}

// ---- decode: lanes are output rows ----

// 16 rows from w (rows at or past `rows` repeat the last valid one and are not stored) times T
// tokens. [ahead, ahead_end): the next rows' bytes, prefetched in address order as fast as these
// rows are consumed, so the memory system sees one sequential stream instead of 16 interleaved
// ones.
template <int T>
void DecodeGroup(const Bf16* x, int64_t k, const Bf16* w, int64_t rows, float* y, int64_t ldy,
                 const char* ahead, const char* ahead_end) {
  const Bf16* row[16];
  for (int i = 0; i < 16; ++i) row[i] = w + std::min<int64_t>(i, rows - 1) * k;
  __m512 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  int64_t kk = 0;
  for (; kk + kChunk <= k; kk += kChunk) {
    for (int line = 0; line < 16; ++line, ahead += 64) {
      if (ahead < ahead_end) _mm_prefetch(ahead, _MM_HINT_T0);
    }
    __m512i v[16];
    LoadTransposed(row, kk, v);
    for (int p = 0; p < 16; ++p) {
      for (int t = 0; t < T; ++t)
        acc[t] = _mm512_dpbf16_ps(acc[t], AsBh(BroadcastPair(x + t * k, kk + 2 * p)), AsBh(v[p]));
    }
  }
  if (kk < k) {
    const int64_t elements = k - kk;
    const __mmask32 mask = (__mmask32{1} << elements) - 1;
    __m512i v[16];
    for (int i = 0; i < 16; ++i) v[i] = _mm512_maskz_loadu_epi16(mask, row[i] + kk);
    Transpose16(v);
    __m512i xt[T];
    for (int t = 0; t < T; ++t) xt[t] = _mm512_maskz_loadu_epi16(mask, x + t * k + kk);
    for (int p = 0; p < (elements + 1) / 2; ++p) {
      const __m512i index = _mm512_set1_epi32(p);
      for (int t = 0; t < T; ++t) {
        acc[t] = _mm512_dpbf16_ps(acc[t], AsBh(_mm512_permutexvar_epi32(index, xt[t])), AsBh(v[p]));
      }
    }
  }
  const __mmask16 store = static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(rows, 16)) - 1);
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy, store, acc[t]);
}

template <int T>
void DecodeRows(const Bf16* x, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end, float* y,
                int64_t ldy) {
  const char* end = reinterpret_cast<const char*>(w + n_end * k);
  for (int64_t j = n_begin; j < n_end; j += 16) {
    DecodeGroup<T>(x, k, w + j * k, n_end - j, y + j, ldy,
                   reinterpret_cast<const char*>(w + (j + 16) * k), end);
  }
}

// Packed decode: T tokens x G row groups (gw: the first group's vectors, `stride` elements apart;
// `rows`: valid rows from its first row). The G groups are G sequential streams; each is prefetched
// kAhead bytes ahead of its reads, up to `end` (the task's last byte).
constexpr int64_t kAhead = 1024;

template <int T, int G>
void DecodePackedGroups(const Bf16* x, int64_t k, const Bf16* gw, int64_t stride, int64_t rows,
                        float* y, int64_t ldy, const char* end) {
  const int64_t full = k / 2;
  __m512 acc[T][G];
  for (int t = 0; t < T; ++t) {
    for (int g = 0; g < G; ++g) acc[t][g] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < full; ++p) {
    for (int g = 0; g < G; ++g) {
      const char* ahead = reinterpret_cast<const char*>(gw + g * stride + p * 2 * kLanes) + kAhead;
      if (ahead < end) _mm_prefetch(ahead, _MM_HINT_T0);
    }
    // The G weight vectors stay in registers while each token's pair is broadcast once: T x G
    // accumulators + G + 1 registers.
    __m512i wv[G];
    for (int g = 0; g < G; ++g) wv[g] = _mm512_load_si512(gw + g * stride + p * 2 * kLanes);
    for (int t = 0; t < T; ++t) {
      const __m512i xv = BroadcastPair(x + t * k, 2 * p);
      for (int g = 0; g < G; ++g) acc[t][g] = _mm512_dpbf16_ps(acc[t][g], AsBh(xv), AsBh(wv[g]));
    }
  }
  if (full * 2 < k) {  // odd k: the token's last element and a zero times the zero-padded last pair
    for (int g = 0; g < G; ++g) {
      const __m512i wv = _mm512_load_si512(gw + g * stride + full * 2 * kLanes);
      for (int t = 0; t < T; ++t)
        acc[t][g] = _mm512_dpbf16_ps(acc[t][g], AsBh(BroadcastLastOdd(x + t * k, k - 1)), AsBh(wv));
    }
  }
  for (int g = 0; g < G; ++g) {
    const __mmask16 store =
        static_cast<__mmask16>((uint32_t{1} << std::clamp<int64_t>(rows - g * kLanes, 0, 16)) - 1);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * ldy + g * kLanes, store, acc[t][g]);
  }
}

// Groups [first, last) of a packed matrix, G at a time, the rest in halves (G / 2, ...).
template <int T, int G>
void DecodePackedRange(const Bf16* x, int64_t k, const Bf16* wp, int64_t stride, int64_t first,
                       int64_t last, int64_t n_end, float* y, int64_t ldy, const char* end) {
  int64_t g = first;
  for (; g + G <= last; g += G) {
    DecodePackedGroups<T, G>(x, k, wp + g * stride, stride, n_end - g * kLanes, y + g * kLanes, ldy,
                             end);
  }
  if constexpr (G > 1) {
    if (g < last) DecodePackedRange<T, G / 2>(x, k, wp, stride, g, last, n_end, y, ldy, end);
  }
}

// Row groups in flight for T tokens: at least 8 independent accumulators (vdpbf16ps latency), at
// least 2 groups so each broadcast feeds two multiplies, 3 from 5 tokens (fewer loads per
// multiply; 8 x 3 accumulators + 3 weights + 1 broadcast still fit the 32 registers); packed
// decode of 9-12 tokens 2 (at most 24 + 2 + 1).
constexpr int GroupsInFlight(int tokens) {
  if (tokens > 8) return 2;
  return tokens >= 5 ? 3 : std::max(2, (8 + tokens - 1) / tokens);
}

template <int T>
void DecodePackedRows(const Bf16* x, int64_t k, const Bf16* wp, int64_t n_begin, int64_t n_end,
                      float* y, int64_t ldy) {
  const int64_t stride = (k + 1) / 2 * 2 * kLanes;
  const int64_t first = n_begin / kLanes, last = (n_end + kLanes - 1) / kLanes;
  const char* end = reinterpret_cast<const char*>(wp + last * stride);
  DecodePackedRange<T, GroupsInFlight(T)>(x, k, wp, stride, first, last, n_end, y, ldy, end);
}

// ---- prefill: lanes are tokens ----

// Where a prefill tile finds its broadcast weight pairs: pair p of row r at Row(r) + p *
// kPairStride.
struct RowMajorRows {
  static constexpr int64_t kPairStride = 2;
  static constexpr bool kPaddedPairs =
      false;  // odd k: the last pair's second element is the next row's
  const Bf16* w;
  int64_t k;
  const Bf16* Row(int64_t r) const { return w + r * k; }
};
struct PackedRows {
  static constexpr int64_t kPairStride = 2 * kLanes;
  static constexpr bool kPaddedPairs = true;
  const Bf16* wp;
  int64_t group_elements;
  const Bf16* Row(int64_t r) const { return wp + r / kLanes * group_elements + r % kLanes * 2; }
};

// A tile of TV token vectors x R weight rows over all of k. xp: the first token vector's pairs
// (vector tv, pair p at xp + (tv * pairs + p) * 16 dwords); out: [R][64] floats.
template <int TV, int R, typename Layout>
void TokenTile(const int32_t* xp, int64_t pairs, int64_t k, const Layout& layout, int64_t row0,
               float* out) {
  const Bf16* row[R];
  for (int r = 0; r < R; ++r) row[r] = layout.Row(row0 + r);
  __m512 acc[TV][R];
  for (int tv = 0; tv < TV; ++tv) {
    for (int r = 0; r < R; ++r) acc[tv][r] = _mm512_setzero_ps();
  }
  const int64_t full = k / 2;
  for (int64_t p = 0; p < full; ++p) {
    __m512i xv[TV];
    for (int tv = 0; tv < TV; ++tv) xv[tv] = _mm512_load_si512(xp + (tv * pairs + p) * kLanes);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = BroadcastPair(row[r], p * Layout::kPairStride);
      for (int tv = 0; tv < TV; ++tv)
        acc[tv][r] = _mm512_dpbf16_ps(acc[tv][r], AsBh(xv[tv]), AsBh(wv));
    }
  }
  if (full < pairs) {
    for (int r = 0; r < R; ++r) {
      const __m512i wv = Layout::kPaddedPairs ? BroadcastPair(row[r], full * Layout::kPairStride)
                                              : BroadcastLastOdd(row[r], k - 1);
      for (int tv = 0; tv < TV; ++tv) {
        const __m512i xv = _mm512_load_si512(xp + (tv * pairs + full) * kLanes);
        acc[tv][r] = _mm512_dpbf16_ps(acc[tv][r], AsBh(xv), AsBh(wv));
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int tv = 0; tv < TV; ++tv)
      _mm512_store_ps(out + r * kBlockVectors * kLanes + tv * kLanes, acc[tv][r]);
  }
}

// TV token vectors over `rows` rows of a panel: tiles of R rows, the rest in tiles of R / 2, R / 4,
// ... (several independent accumulator chains even at a panel's edge).
template <int TV, int R, typename Layout>
void TokensOverPanel(const int32_t* xp, int64_t pairs, int64_t k, const Layout& layout,
                     int64_t row0, int64_t rows, float* out) {
  int64_t r = 0;
  for (; r + R <= rows; r += R)
    TokenTile<TV, R>(xp, pairs, k, layout, row0 + r, out + r * kBlockVectors * kLanes);
  if constexpr (R > 1) {
    if (r < rows)
      TokensOverPanel<TV, R / 2>(xp, pairs, k, layout, row0 + r, rows - r,
                                 out + r * kBlockVectors * kLanes);
  }
}

// out [rows][64] (row-major, token-minor) -> y[token][row] for `tokens` tokens, by 16 x 16 blocks.
void StoreTransposed(const float* out, int64_t rows, int64_t tokens, float* y, int64_t ldy) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const __mmask16 row_mask =
        static_cast<__mmask16>((uint32_t{1} << std::min<int64_t>(16, rows - r0)) - 1);
    for (int64_t t0 = 0; t0 < tokens; t0 += 16) {
      __m512i v[16];
      for (int i = 0; i < 16; ++i) {
        v[i] = _mm512_load_si512(out + (r0 + i) * kBlockVectors * kLanes + t0);
      }
      Transpose16(v);
      for (int64_t t = 0; t < std::min<int64_t>(16, tokens - t0); ++t) {
        _mm512_mask_storeu_ps(y + (t0 + t) * ldy + r0, row_mask, _mm512_castsi512_ps(v[t]));
      }
    }
  }
}

template <typename Layout>
void PrefillRows(const int32_t* xp, int64_t m, int64_t k, const Layout& layout, int64_t n_begin,
                 int64_t n_end, float* y, int64_t ldy) {
  const int64_t pairs = (k + 1) / 2;
  // Rows past `rows` and tokens past `tokens` are read by StoreTransposed but never stored.
  alignas(64) float out[kPanelRows][kBlockVectors * kLanes];
  for (int64_t j0 = n_begin; j0 < n_end; j0 += kPanelRows) {
    const int64_t rows = std::min(kPanelRows, n_end - j0);
    for (int64_t i0 = 0; i0 < m; i0 += kBlockVectors * kLanes) {
      const int64_t tokens = std::min(kBlockVectors * kLanes, m - i0);
      const int32_t* block = xp + i0 / kLanes * pairs * kLanes;
      switch ((tokens + kLanes - 1) / kLanes) {
        case 4:
          TokensOverPanel<4, 6>(block, pairs, k, layout, j0, rows, out[0]);
          break;
        case 3:
          TokensOverPanel<3, 8>(block, pairs, k, layout, j0, rows, out[0]);
          break;
        case 2:
          TokensOverPanel<2, 12>(block, pairs, k, layout, j0, rows, out[0]);
          break;
        default:
          TokensOverPanel<1, 12>(block, pairs, k, layout, j0, rows, out[0]);
          break;
      }
      StoreTransposed(out[0], rows, tokens, y + i0 * ldy + j0, ldy);
    }
  }
}

// Packs 16 token rows (fewer at the end: zeros) into pair-major vectors; Load(t, e, mask) gives
// row t's 32 bf16 elements from e (masked past k).
template <typename LoadFn>
void PackBlock(int64_t rows, int64_t k, LoadFn load, int32_t* out) {
  for (int64_t kk = 0; kk < k; kk += kChunk) {
    const int64_t elements = std::min(kChunk, k - kk);
    const __mmask32 mask = elements == kChunk ? ~__mmask32{0} : (__mmask32{1} << elements) - 1;
    __m512i v[16];
    for (int t = 0; t < 16; ++t) v[t] = t < rows ? load(t, kk, mask) : _mm512_setzero_si512();
    Transpose16(v);
    for (int64_t p = 0; p < (elements + 1) / 2; ++p)
      _mm512_store_si512(out + (kk / 2 + p) * kLanes, v[p]);
  }
}

}  // namespace

void ConvertToBf16Avx512(const float* in, int64_t count, Bf16* out) {
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m512bh packed =
        _mm512_cvtne2ps_pbh(_mm512_loadu_ps(in + i + 16), _mm512_loadu_ps(in + i));
    _mm512_storeu_si512(out + i, reinterpret_cast<__m512i>(packed));
  }
  for (; i < count; ++i) out[i] = FloatToBf16(in[i]);
}

void PackTokenPairsAvx512(const float* x, int64_t tokens, int64_t k, int32_t* out) {
  PackBlock(
      tokens, k,
      [&](int t, int64_t e, __mmask32 mask) {
        const float* row = x + t * k + e;
        const __m512 low = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask), row);
        const __m512 high = _mm512_maskz_loadu_ps(static_cast<__mmask16>(mask >> 16), row + 16);
        return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
      },
      out);
}

void PackTokenPairsAvx512(const Bf16* x, int64_t tokens, int64_t k, int32_t* out) {
  PackBlock(
      tokens, k,
      [&](int t, int64_t e, __mmask32 mask) {
        return _mm512_maskz_loadu_epi16(mask, x + t * k + e);
      },
      out);
}

namespace {

// Calls decode(std::integral_constant<int, m>) for m in 1..kDecodeTokens: the decode kernels take
// the token count as a template argument (their register tiles are sized by it).
template <typename Decode>
void ForDecodeTokens(int64_t m, const Decode& decode) {
  switch (m) {
    case 8:
      decode(std::integral_constant<int, 8>{});
      break;
    case 7:
      decode(std::integral_constant<int, 7>{});
      break;
    case 6:
      decode(std::integral_constant<int, 6>{});
      break;
    case 5:
      decode(std::integral_constant<int, 5>{});
      break;
    case 4:
      decode(std::integral_constant<int, 4>{});
      break;
    case 3:
      decode(std::integral_constant<int, 3>{});
      break;
    case 2:
      decode(std::integral_constant<int, 2>{});
      break;
    default:
      decode(std::integral_constant<int, 1>{});
      break;
  }
}

// Packed weights need no transpose, so their decode tiles go to 12 tokens (GroupsInFlight): one
// pass over the weights where 8-token chunks read them twice. 13-24 tokens: two near-equal chunks.
// A 16-token tile of one group measured no faster than two 8-token chunks. Measured:
// kernels/README.md, "Packed decode to 12 tokens".
constexpr int64_t kPackedDecodeTokens = kAvx512Bf16PackedDecodeTokens;

// Calls decode(std::integral_constant<int, m>) for m in 1..kPackedDecodeTokens.
template <typename Decode>
void ForPackedDecodeTokens(int64_t m, const Decode& decode) {
  if (m <= kDecodeTokens) return ForDecodeTokens(m, decode);
  switch (m) {
    case 9:
      return decode(std::integral_constant<int, 9>{});
    case 10:
      return decode(std::integral_constant<int, 10>{});
    case 11:
      return decode(std::integral_constant<int, 11>{});
    default:
      return decode(std::integral_constant<int, 12>{});
  }
}

// Up to 8 tokens one decode tile over all rows; 9 to kAvx512Bf16ChunkedDecodeTokens chunked
// (matmul_internal.h). decode(std::integral_constant<int, T>, first_token, row_begin, row_end).
template <typename Decode>
void DecodeTokens(int64_t m, int64_t k, int64_t n_begin, int64_t n_end, const Decode& decode) {
  if (m <= kDecodeTokens) {
    ForDecodeTokens(m, [&](auto tokens) { decode(tokens, 0, n_begin, n_end); });
    return;
  }
  ForChunkedDecode(m, k, n_begin, n_end, kDecodeTokens,
                   [&](int64_t t, int64_t chunk, int64_t row, int64_t row_end) {
                     ForDecodeTokens(chunk, [&](auto tokens) { decode(tokens, t, row, row_end); });
                   });
}

}  // namespace

void MatmulRowsAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m, int64_t k,
                          const Bf16* w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  if (m > kAvx512Bf16ChunkedDecodeTokens) {
    PrefillRows(x_pairs, m, k, RowMajorRows{w, k}, n_begin, n_end, y, ldy);
    return;
  }
  DecodeTokens(m, k, n_begin, n_end, [&](auto tokens, int64_t t, int64_t row, int64_t row_end) {
    DecodeRows<tokens()>(x + t * k, k, w, row, row_end, y + t * ldy, ldy);
  });
}

void MatmulPackedRowsAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m, int64_t k,
                                const Bf16* wp, int64_t n_begin, int64_t n_end, float* y,
                                int64_t ldy) {
  if (m > kAvx512Bf16ChunkedDecodeTokens) {
    PrefillRows(x_pairs, m, k, PackedRows{wp, (k + 1) / 2 * 2 * kLanes}, n_begin, n_end, y, ldy);
    return;
  }
  const auto decode = [&](auto tokens, int64_t t, int64_t row, int64_t row_end) {
    DecodePackedRows<tokens()>(x + t * k, k, wp, row, row_end, y + t * ldy, ldy);
  };
  if (m <= kPackedDecodeTokens) {
    ForPackedDecodeTokens(m, [&](auto tokens) { decode(tokens, 0, n_begin, n_end); });
    return;
  }
  // Two near-equal chunks (17 tokens: 9 + 8), the second reading the panel from L2.
  ForChunkedDecode(m, k, n_begin, n_end, (m + 1) / 2,
                   [&](int64_t t, int64_t chunk, int64_t row, int64_t row_end) {
                     ForPackedDecodeTokens(chunk,
                                           [&](auto tokens) { decode(tokens, t, row, row_end); });
                   });
}

}  // namespace moelab::kernels::internal
