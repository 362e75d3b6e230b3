#pragma once

// exp(x) as the kernels' softmaxes take it. Not a public header. In an unnamed namespace: each
// translation unit that includes it (one per instruction set, compiled with that set's flags) gets
// its own copy, so the linker cannot hand a baseline caller another set's code.

#include <bit>
#include <cstdint>

namespace moelab::kernels::internal {
namespace {

// exp(x), relative error < 3e-7 over the float range, written so the compiler vectorizes it:
// n = round(x / ln 2), f = x - n ln 2 with ln 2 split in two (Cody-Waite: n * kLn2High is exact),
// e^f by its degree-6 Taylor polynomial on |f| <= ln2 / 2, times 2^n built in the exponent bits.
// Plain multiplies and adds in a fixed order: every instruction set computes the same bits where
// the translation unit does not contract them into FMAs (-ffp-contract=off).
inline float FastExp(float x) {
  constexpr float kLn2High = 0.693359375f;
  constexpr float kLn2Low = -2.12194440e-4f;
  x = x > 88.0f ? 88.0f : x;
  x = x < -87.0f ? -87.0f : x;
  // Round to nearest by the 1.5 * 2^23 trick (vectorizes; std::nearbyint is a libm call).
  constexpr float kRound = 12582912.0f;
  const float n = (x * 1.44269504088896341f + kRound) - kRound;
  const float f = (x - n * kLn2High) - n * kLn2Low;
  float p = 1.0f / 720.0f;
  p = p * f + 1.0f / 120.0f;
  p = p * f + 1.0f / 24.0f;
  p = p * f + 1.0f / 6.0f;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
  return p * scale;
}

}  // namespace
}  // namespace moelab::kernels::internal
