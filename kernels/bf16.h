#pragma once

#include <cstdint>
#include <cstring>

namespace moelab::kernels {

// bfloat16 stored as its 16 raw bits: the upper half of an IEEE float.
using Bf16 = uint16_t;

inline float Bf16ToFloat(Bf16 value) {
  const uint32_t bits = static_cast<uint32_t>(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

// Round to nearest, ties to even; NaN stays NaN (quiet), infinities stay infinite.
inline Bf16 FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0) {
    return static_cast<Bf16>((bits >> 16) | 0x0040u);
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<Bf16>((bits + rounding) >> 16);
}

}  // namespace moelab::kernels
