// Compiled with -mavx2 -mfma; only called when the CPU has both. The fp32-FMA matmul on packed
// weights (kernels/matmul_row_lanes.h) with 8 output rows per 256-bit vector: half of a packed
// group's 64-byte pair vector.
#include <immintrin.h>

#include "kernels/matmul_internal.h"
#include "kernels/matmul_row_lanes.h"

namespace moelab::kernels::internal {
namespace {

struct Avx2Lanes {
  using V = __m256;
  static constexpr int kRows = 8;
  // 16 registers: T x V accumulators + 2 V weight vectors (a pair's even and odd halves) + 1
  // broadcast. Decode keeps 8-12 accumulators; 6 tokens take one row vector (6 x 2 would need 17
  // registers: the spills made a 6-token LM head 4.7 ms where 5 tokens take 2.2 and 6 x 1 takes
  // 3.4, an expert FFN 1.63 ms where 6 x 1 takes 1.23); 7-8 tokens run as 4-token tiles (one
  // 8-token tile of one vector measured 5-15 % slower). Prefill tiles 6 tokens x 16 rows, the
  // classic 6 x 16 fp32 kernel shape.
  static constexpr int DecodeTileTokens(int tokens) { return tokens <= 6 ? tokens : 4; }
  static constexpr int DecodeVectors(int tokens) {
    constexpr int kVectors[] = {8, 4, 3, 2, 2, 1, 2, 2};
    return kVectors[tokens - 1];
  }
  static constexpr int kTileTokens = 5;
  static constexpr int kTileVectors = 2;
  static constexpr int64_t kPanelRows = 16;
  static constexpr int64_t kChunkedDecodeTokens = 16;  // matmul_internal.h: measured

  static V Zero() { return _mm256_setzero_ps(); }
  // Even: the pair dwords shifted left by 16. Odd: the dwords read one element later (their low
  // half is the odd element) shifted the same way: no mask constant, which would take the 16th
  // register the 6 x 16 tile needs (PackedBf16Matrix pads its storage for the last such read).
  static V Even(const Bf16* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)), 16));
  }
  static V Odd(const Bf16* p) {
    return _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 1)), 16));
  }
  static V Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V Fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static __m256i Mask(int64_t rows) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(rows)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V Load(const float* p, int64_t rows) {
    return rows >= kRows ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, Mask(rows));
  }
  static void Store(float* p, V v, int64_t rows) {
    if (rows >= kRows) {
      _mm256_storeu_ps(p, v);
    } else {
      _mm256_maskstore_ps(p, Mask(rows), v);
    }
  }
  static void Prefetch(const char* p) { _mm_prefetch(p, _MM_HINT_T0); }
};

}  // namespace

void MatmulPackedRowsAvx2(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy) {
  row_lanes::PackedRows<Avx2Lanes>(x, m, k, wp, n_begin, n_end, y, ldy);
}

void RoundToBf16FloatsAvx2(const float* in, int64_t count, float* out) {
  const __m256i round_bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  const __m256i high = _mm256_set1_epi32(static_cast<int32_t>(0xffff0000u)),
                quiet = _mm256_set1_epi32(0x00400000);
  int64_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 v = _mm256_loadu_ps(in + i);
    const __m256i bits = _mm256_castps_si256(v);
    // Nearest even: add 0x7fff plus the bit that becomes the last kept one, then truncate.
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    const __m256i rounded =
        _mm256_and_si256(_mm256_add_epi32(bits, _mm256_add_epi32(round_bias, lsb)), high);
    // NaN stays a quiet NaN of the same sign (as FloatToBf16).
    const __m256i nan = _mm256_and_si256(_mm256_or_si256(bits, quiet), high);
    const __m256 is_nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    _mm256_storeu_ps(
        out + i, _mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(nan), is_nan));
  }
  for (; i < count; ++i) out[i] = Bf16ToFloat(FloatToBf16(in[i]));
}

}  // namespace moelab::kernels::internal
