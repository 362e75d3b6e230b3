#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace moelab::kernels {

// IEEE binary16 stored as its raw bits: the block scales of the quantized formats (as llama.cpp's
// Q8_0 / Q4_0 store them). Portable conversions; the AVX2 kernels use F16C's vcvtph2ps, which
// gives the same values.
using Fp16 = uint16_t;

inline float Fp16ToFloat(Fp16 h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal (or zero)
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    const uint32_t bits = ((exponent + 112u) << 23) | (mantissa << 13);
    std::memcpy(&magnitude, &bits, sizeof(magnitude));
  }
  uint32_t bits;
  std::memcpy(&bits, &magnitude, sizeof(bits));
  bits |= sign;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

// Round to nearest, ties to even; values beyond the largest finite fp16 (65504) become infinite.
inline Fp16 FloatToFp16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return static_cast<Fp16>(sign | 0x7e00u);   // NaN
  if (magnitude >= 0x477ff000u) return static_cast<Fp16>(sign | 0x7c00u);  // rounds past 65504
  if (magnitude <
      0x38800000u) {  // below 2^-14: a subnormal step of 2^-24 (1024 is the smallest normal)
    float abs_value;
    std::memcpy(&abs_value, &magnitude, sizeof(abs_value));
    return static_cast<Fp16>(sign |
                             static_cast<uint16_t>(std::nearbyint(std::ldexp(abs_value, 24))));
  }
  const uint32_t mantissa = magnitude & 0x7fffffu;
  uint32_t h = (((magnitude >> 23) - 112u) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<Fp16>(sign | h);
}

}  // namespace moelab::kernels
