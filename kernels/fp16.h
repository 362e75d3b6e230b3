#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace moelab::kernels {

// IEEE binary16 stored as its raw bits: the block scales of the quantized formats (as llama.cpp's
// Q8_0 / Q4_0 store them) and safetensors' F16 tensors (weights/). Portable conversions; the AVX2
// kernels use F16C's vcvtph2ps, which gives the same bits (tests/kernels/fp16_test.cc checks all
// 65536 inputs against it where the CPU has F16C).
using Fp16 = uint16_t;

// Exact (every fp16 value is a float). A NaN stays NaN with its sign and payload and comes out
// quiet (IEEE 754-2008 6.2: a conversion signals on a signaling NaN and delivers a quiet one), as
// vcvtph2ps does; a signaling NaN handed on as signaling would trap or be quieted later, giving
// different bits on different paths.
inline float Fp16ToFloat(Fp16 h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {
    const uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;  // infinity has none
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {
    // Zero or subnormal: mantissa x 2^-24, exact in float; the sign kept for -0.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  // Normal: the exponent rebiased from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
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
