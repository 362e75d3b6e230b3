#include <algorithm>
#include <cmath>

#include "kernels/matmul_internal.h"

namespace moelab::kernels::internal {

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

void MatmulQuantizedRowsScalar(const QuantizedActivations& x, const QuantizedMatrix& w,
                               int64_t n_begin, int64_t n_end, float* y, int64_t ldy) {
  const int64_t k = w.cols(), block = QuantizedActivations::kBlock;
  for (int64_t j = n_begin; j < n_end; ++j) {
    for (int64_t i = 0; i < x.tokens; ++i) {
      const int8_t* xq = x.token_quants(i);
      float sum = 0.0f;
      for (int64_t b = 0; b < x.blocks; ++b) {
        int32_t dot = 0;  // exact
        for (int64_t c = b * block; c < std::min(k, (b + 1) * block); ++c)
          dot += w.Quant(j, c) * xq[c];
        sum = std::fma(w.Scale(j, b) * x.token_scales(i)[b], static_cast<float>(dot), sum);
      }
      y[i * ldy + j] = sum;
    }
  }
}

}  // namespace moelab::kernels::internal
