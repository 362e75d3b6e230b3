#include <cmath>

#include "kernels/matmul_internal.h"

namespace moelab::kernels_internal {

void MatmulRowsScalar(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                      int64_t n_end, float* y, int64_t ldy) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const Bf16* row = w + j * k;
    for (int64_t i = 0; i < m; ++i) {
      const Bf16* xi = x + i * k;
      float sum = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) sum += Bf16ToFloat(xi[kk]) * Bf16ToFloat(row[kk]);
      y[i * ldy + j] = sum;
    }
  }
}

void MatmulQuantizedRowsScalar(const float* x, int64_t m, const QuantizedMatrix& w, int64_t n_begin, int64_t n_end,
                               float* y, int64_t ldy) {
  const int64_t k = w.cols();
  for (int64_t j = n_begin; j < n_end; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      float sum = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) sum = std::fma(x[i * k + kk], w.At(j, kk), sum);
      y[i * ldy + j] = sum;
    }
  }
}

}  // namespace moelab::kernels_internal
