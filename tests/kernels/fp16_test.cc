// The one IEEE fp16 conversion (kernels/fp16.h): exact values, NaN, infinities, subnormals,
// rounding; every input against F16C's vcvtph2ps / vcvtps2ph where this CPU has them.
#include "kernels/fp16.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include <gtest/gtest.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace moelab::kernels {
namespace {

constexpr uint32_t kFloatQuietBit = 0x00400000u;

bool IsQuietNan(float value) {
  return std::isnan(value) && (std::bit_cast<uint32_t>(value) & kFloatQuietBit) != 0;
}

TEST(Fp16ToFloat, KnownValuesConvertExactly) {
  EXPECT_EQ(Fp16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(Fp16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(Fp16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(Fp16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(Fp16ToFloat(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(Fp16ToFloat(0x0001), std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(Fp16ToFloat(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(Fp16ToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(Fp16ToFloat(0x0000), 0.0f);
  EXPECT_FALSE(std::signbit(Fp16ToFloat(0x0000)));
  EXPECT_TRUE(std::signbit(Fp16ToFloat(0x8000)));
  EXPECT_EQ(Fp16ToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(Fp16ToFloat(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(Fp16ToFloat, EveryFiniteValueMatchesItsDefinition) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint32_t exponent = (bits >> 10) & 0x1f;
    if (exponent == 0x1f) continue;
    const float mantissa = static_cast<float>(bits & 0x3ff);
    const float magnitude = exponent == 0
                                ? std::ldexp(mantissa, -24)
                                : std::ldexp(1024.0f + mantissa, static_cast<int>(exponent) - 25);
    const float expected = (bits & 0x8000) != 0 ? -magnitude : magnitude;
    ASSERT_EQ(std::bit_cast<uint32_t>(Fp16ToFloat(static_cast<Fp16>(bits))),
              std::bit_cast<uint32_t>(expected))
        << std::hex << bits;
  }
}

// Quiet and signaling NaNs of either sign: NaN, quiet, sign and payload kept.
TEST(Fp16ToFloat, NanStaysNanQuietWithSignAndPayload) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    if (((bits >> 10) & 0x1f) != 0x1f || (bits & 0x3ff) == 0) continue;
    const float value = Fp16ToFloat(static_cast<Fp16>(bits));
    ASSERT_TRUE(IsQuietNan(value)) << std::hex << bits;
    ASSERT_EQ(std::signbit(value), (bits & 0x8000) != 0) << std::hex << bits;
    ASSERT_EQ((std::bit_cast<uint32_t>(value) >> 13) & 0x1ff, bits & 0x1ff) << std::hex << bits;
  }
  EXPECT_EQ(std::bit_cast<uint32_t>(Fp16ToFloat(0x7e00)), 0x7fc00000u);  // the canonical quiet NaN
  EXPECT_EQ(std::bit_cast<uint32_t>(Fp16ToFloat(0x7c01)), 0x7fc02000u);  // signaling, made quiet
  EXPECT_EQ(std::bit_cast<uint32_t>(Fp16ToFloat(0xfd00)), 0xffe00000u);
}

TEST(FloatToFp16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(65519.99f), 0x7bff);                             // below the tie
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);                              // the tie past 65504
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);          // tie to even (down)
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);      // tie to even (up)
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11) * 1.01f), 0x3c01);  // above the tie
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -24)), 0x0001);                 // smallest subnormal
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -25)), 0x0000);                 // tie to even: zero
  EXPECT_EQ(FloatToFp16(std::ldexp(3.0f, -25)), 0x0002);                 // tie to even: 2
  EXPECT_EQ(FloatToFp16(std::ldexp(1023.5f, -24)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToFp16(-std::ldexp(1.0f, -30)), 0x8000);  // -0 keeps its sign
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(FloatToFp16, InfinityAndNan) {
  EXPECT_EQ(FloatToFp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToFp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(FloatToFp16(1e10f), 0x7c00);
  EXPECT_EQ(FloatToFp16(-1e10f), 0xfc00);
  // NaN stays NaN, quiet, with its sign (its payload is not kept: one quiet NaN per sign).
  for (const uint32_t bits : {0x7fc00000u, 0x7f800001u, 0x7fffffffu, 0xffc00000u, 0xff800001u}) {
    const Fp16 h = FloatToFp16(std::bit_cast<float>(bits));
    EXPECT_EQ(h & 0x7fffu, 0x7e00u) << std::hex << bits;
    EXPECT_EQ((h & 0x8000u) != 0, (bits & 0x80000000u) != 0) << std::hex << bits;
    EXPECT_TRUE(IsQuietNan(Fp16ToFloat(h)));
  }
}

TEST(Fp16, EveryNonNanValueRoundTrips) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    if ((h & 0x7fffu) > 0x7c00u) continue;  // NaN
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<Fp16>(h))), h) << std::hex << h;
  }
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint32_t HardwareToFloatBits(Fp16 h) {
  return std::bit_cast<uint32_t>(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
}

__attribute__((target("f16c"))) Fp16 HardwareToFp16(float value) {
  return static_cast<Fp16>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT), 0));
}

// The portable conversions are what the F16C kernels compute, bit for bit.
TEST(Fp16, MatchesF16cBitForBit) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    ASSERT_EQ(std::bit_cast<uint32_t>(Fp16ToFloat(static_cast<Fp16>(h))),
              HardwareToFloatBits(static_cast<Fp16>(h)))
        << std::hex << h;
  }
  // Every float on a stride coprime to the exponent/mantissa boundaries, NaNs left out (vcvtps2ph
  // keeps a NaN's payload; FloatToFp16 gives the one quiet NaN).
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 251) {
    const float value = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(value)) continue;
    ASSERT_EQ(FloatToFp16(value), HardwareToFp16(value)) << std::hex << bits;
  }
}
#endif

}  // namespace
}  // namespace moelab::kernels
