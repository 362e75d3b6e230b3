#include "kernels/quantized_activations.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace moelab::kernels {

void ResizeQuantizedActivations(int64_t m, int64_t k, QuantizedActivations& out) {
  out.tokens = m;
  out.blocks = (k + QuantizedActivations::kBlock - 1) / QuantizedActivations::kBlock;
  out.quants.resize(static_cast<size_t>(m * out.blocks * QuantizedActivations::kBlock));
  out.scales.resize(static_cast<size_t>(m * out.blocks));
  out.sums.resize(static_cast<size_t>(m * out.blocks));
}

void QuantizeActivationBlock(const float* x, int64_t count, int8_t* quants, float* scale,
                             int32_t* sum) {
  float largest = 0;
  bool finite = true;
  for (int64_t e = 0; e < count; ++e) {
    finite = finite && std::isfinite(x[e]);
    largest = std::max(largest, std::fabs(x[e]));
  }
  const float d = finite ? largest / 127.0f : std::numeric_limits<float>::quiet_NaN();
  *sum = 0;
  for (int64_t e = 0; e < QuantizedActivations::kBlock; ++e) {
    // |x / d| rounds to <= 127 unless d is subnormal (inexact), hence the clamp; d == 0 only when
    // the block is (nearly) zero, whose quants are 0.
    const float v = e < count && finite && d != 0
                        ? std::clamp(RoundToNearestEven(x[e] / d), -127.0f, 127.0f)
                        : 0.0f;
    quants[e] = static_cast<int8_t>(v);
    *sum += quants[e];
  }
  *scale = d;
}

void QuantizeActivationTokensScalar(const float* x, int64_t k, int64_t t_begin, int64_t t_end,
                                    QuantizedActivations& out) {
  constexpr int64_t kBlock = QuantizedActivations::kBlock;
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < out.blocks; ++b) {
      const size_t at = static_cast<size_t>(t * out.blocks + b);
      QuantizeActivationBlock(x + t * k + b * kBlock, std::min(kBlock, k - b * kBlock),
                              out.quants.data() + at * kBlock, &out.scales[at], &out.sums[at]);
    }
  }
}

}  // namespace moelab::kernels
