// Compiled with -mavx2 -mfma; only called when the CPU has both.
#include <immintrin.h>

#include "kernels/matmul_internal.h"

namespace moelab::kernels_internal {
namespace {

inline __m256 LoadBf16x8(const Bf16* p) {
  const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
}

inline float HorizontalSum(__m256 v) {
  const __m128 low = _mm256_castps256_ps128(v);
  const __m128 high = _mm256_extractf128_ps(v, 1);
  __m128 sum = _mm_add_ps(low, high);
  sum = _mm_add_ps(sum, _mm_movehl_ps(sum, sum));
  sum = _mm_add_ss(sum, _mm_shuffle_ps(sum, sum, 0x55));
  return _mm_cvtss_f32(sum);
}

// T tokens x R weight rows, full k in registers.
template <int T, int R>
void Tile(const Bf16* x, int64_t k, const Bf16* w, float* y, int64_t ldy) {
  __m256 acc[T][R];
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) {
    __m256 xv[T];
    for (int t = 0; t < T; ++t) xv[t] = LoadBf16x8(x + t * k + kk);
    for (int r = 0; r < R; ++r) {
      const __m256 wv = LoadBf16x8(w + r * k + kk);
      for (int t = 0; t < T; ++t) acc[t][r] = _mm256_fmadd_ps(xv[t], wv, acc[t][r]);
    }
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) {
      float sum = HorizontalSum(acc[t][r]);
      for (int64_t tail = kk; tail < k; ++tail) sum += Bf16ToFloat(x[t * k + tail]) * Bf16ToFloat(w[r * k + tail]);
      y[t * ldy + r] = sum;
    }
  }
}

template <int T>
void RowsForTokens(const Bf16* x, int64_t k, const Bf16* w, int64_t n_begin, int64_t n_end,
                   float* y, int64_t ldy) {
  int64_t j = n_begin;
  for (; j + 4 <= n_end; j += 4) Tile<T, 4>(x, k, w + j * k, y + j, ldy);
  for (; j < n_end; ++j) Tile<T, 1>(x, k, w + j * k, y + j, ldy);
}

}  // namespace

void MatmulRowsAvx2(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                    int64_t n_end, float* y, int64_t ldy) {
  int64_t i = 0;
  for (; i + 3 <= m; i += 3) RowsForTokens<3>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy);
  if (m - i == 2) RowsForTokens<2>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy);
  if (m - i == 1) RowsForTokens<1>(x + i * k, k, w, n_begin, n_end, y + i * ldy, ldy);
}

}  // namespace moelab::kernels_internal
