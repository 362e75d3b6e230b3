// Compiled with -mavx512f -mavx2 -mfma; only called when the CPU has AVX-512F (Skylake-X, Ice Lake
// class: no bf16 dot product). The fp32-FMA matmul on packed weights (kernels/matmul_row_lanes.h)
// with 16 output rows per 512-bit vector: a packed group's whole 64-byte pair vector, so the same
// arithmetic as AVX2 and scalar (one fp32 FMA per exact bf16 product in k order), the same bits.
#include <immintrin.h>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_row_lanes.h"

namespace moelab::kernels::internal {
namespace {

struct Avx512Lanes {
  using V = __m512;
  static constexpr int kRows = 16;
  // 32 registers: T x V accumulators + V weight vectors + 1 broadcast. Decode keeps >= 8
  // independent accumulators where the tokens allow (FMA latency 4 x 2 pipes), all tokens in one
  // tile; prefill tiles 12 tokens x 32 rows (24 accumulators).
  static constexpr int DecodeTileTokens(int tokens) { return tokens; }
  static constexpr int DecodeVectors(int tokens) {
    return tokens <= 3 ? (tokens == 1 ? 8 : 6 - tokens) : 2;
  }
  static constexpr int kTileTokens = 12;
  static constexpr int kTileVectors = 2;
  static constexpr int64_t kPanelRows = 32;
  static constexpr int64_t kChunkedDecodeTokens = 8;  // none: matmul_internal.h

  static V Zero() { return _mm512_setzero_ps(); }
  // Even: the pair dwords shifted left by 16; odd: the dwords read one element later, shifted the
  // same way (PackedBf16Matrix pads its storage for the last such read).
  static V Even(const Bf16* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_load_si512(p), 16));
  }
  static V Odd(const Bf16* p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(p + 1), 16));
  }
  static V Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static __mmask16 Mask(int64_t rows) { return static_cast<__mmask16>((1u << rows) - 1u); }
  static V Load(const float* p, int64_t rows) {
    return rows >= kRows ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(Mask(rows), p);
  }
  static void Store(float* p, V v, int64_t rows) {
    _mm512_mask_storeu_ps(p, rows >= kRows ? __mmask16{0xffff} : Mask(rows), v);
  }
  static void Prefetch(const char* p) { _mm_prefetch(p, _MM_HINT_T0); }
};

}  // namespace

void MatmulPackedRowsAvx512F(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t n_begin,
                             int64_t n_end, float* y, int64_t ldy) {
  row_lanes::PackedRows<Avx512Lanes>(x, m, k, wp, n_begin, n_end, y, ldy);
}

}  // namespace moelab::kernels::internal
