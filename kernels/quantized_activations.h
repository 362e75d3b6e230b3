#pragma once

#include <cstdint>
#include <vector>

namespace moelab::kernels {

// Activations quantized for the integer dot product on block-quantized weights (llama.cpp's q8_0
// activations, as its vec_dot_q4_0_q8_0 / q8_0_q8_0 use, with an fp32 scale): per token, every run
// of 32 elements along k gets d = max|x| / 127 and q = nearest-even(x / d) in [-127, 127]
// (d = 0: all q = 0; a block with a non-finite element gets d = NaN, q = 0, so NaN reaches the
// output as it would in floating point). The value the kernels multiply is d * q. Every ISA
// quantizes with the same IEEE operations, so the bits do not depend on the path or the batch.
struct QuantizedActivations {
  static constexpr int64_t kBlock = 32;

  int64_t tokens = 0;
  int64_t blocks = 0;          // per token: ceil(k / 32)
  std::vector<int8_t> quants;  // [tokens][blocks * 32], zero past k
  std::vector<float> scales;   // [tokens][blocks]
  std::vector<int32_t> sums;   // [tokens][blocks]: sum of the block's quants (q4_0's -8 offset)

  const int8_t* token_quants(int64_t t) const { return quants.data() + t * blocks * kBlock; }
  const float* token_scales(int64_t t) const { return scales.data() + t * blocks; }
  const int32_t* token_sums(int64_t t) const { return sums.data() + t * blocks; }
  // d * q of element c of token t.
  float Value(int64_t t, int64_t c) const {
    return token_scales(t)[c / kBlock] * static_cast<float>(token_quants(t)[c]);
  }
};

// nearbyint in the default rounding mode (ties to even) without a libm call: exact for |v| < 2^22,
// where adding 1.5 x 2^23 leaves a unit step (larger magnitudes are returned as they are; every
// caller clamps to a few hundred).
inline float RoundToNearestEven(float v) {
  constexpr float kShift = 12582912.0f;  // 1.5 x 2^23
  return v > -4194304.0f && v < 4194304.0f ? (v + kShift) - kShift : v;
}

// One block of `count` <= 32 elements: 32 quants (zero past count), the scale and the quants' sum.
void QuantizeActivationBlock(const float* x, int64_t count, int8_t* quants, float* scale,
                             int32_t* sum);
// Sizes `out` for m tokens of k elements (keeps its capacity).
void ResizeQuantizedActivations(int64_t m, int64_t k, QuantizedActivations& out);
// Quantizes tokens [t_begin, t_end) of x (m x k fp32, row-major) into `out` (already sized) with
// the portable code; kernels/matmul.h's QuantizeActivations picks the ISA's (same bits).
void QuantizeActivationTokensScalar(const float* x, int64_t k, int64_t t_begin, int64_t t_end,
                                    QuantizedActivations& out);

}  // namespace moelab::kernels
