#pragma once

#include <cstdint>
#include <bit>
#include <cstring>

// bf16 <-> float live with the kernels (kernels/bf16.h); this adds IEEE fp16 for F16 tensors.
#include "kernels/bf16.h"

namespace moelab::weights {

inline float HalfToFloat(uint16_t value) {
  const uint32_t sign = static_cast<uint32_t>(value & 0x8000u) << 16;
  const uint32_t exponent = (value >> 10) & 0x1fu;
  const uint32_t mantissa = value & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exactly representable in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace moelab::weights
