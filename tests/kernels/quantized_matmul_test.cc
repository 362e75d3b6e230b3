// Block-quantized weights (kernels/quantized_matrix.h): round-trip error bounds per format, the
// matmul against a float64 reference of the dequantized weights on odd shapes on every ISA, every
// integer kernel (AVX2, AVX-512 VNNI) == scalar bit for bit, batch- and thread-invariant tokens,
// refusals.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"

#include "base/error.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/matmul.h"
#include "kernels/weight_matrix.h"

namespace moelab::kernels {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

TEST(Fp16, ConvertsExactlyAndRoundsToNearestEven) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00);  // the tie past the largest finite value
  EXPECT_EQ(FloatToFp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie to even
  EXPECT_EQ(FloatToFp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even (up)
  EXPECT_EQ(FloatToFp16(std::ldexp(1.0f, -24)), 0x0001);             // smallest subnormal
  for (uint32_t h = 0; h < 0x7c00; ++h)
    ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<Fp16>(h))), h) << h;
}

// Per element |w - d q| <= d / 2 (q8_0; q4_0 where w / d <= 7.5), and <= d where q4_0 clamps the
// block's far side at +7 (its scale is set by the other side's largest magnitude, -8 d).
TEST(QuantizedMatrix, RoundTripErrorWithinHalfAStep) {
  for (QuantFormat format : {QuantFormat::kQ8_0, QuantFormat::kQ4_0}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {9, 31}, {17, 100}, {40, 257}}) {
      const std::vector<Bf16> w = RandomWeights(rows * cols, static_cast<uint32_t>(rows * cols));
      QuantizedMatrix q(format, rows, cols);
      q.QuantizeRows(0, rows, w.data());
      double squared = 0, steps = 0;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          const double d = q.Scale(r, c / kQuantBlock), original = Bf16ToFloat(w[r * cols + c]);
          const double error = std::fabs(q.At(r, c) - original);
          const bool clamped = format == QuantFormat::kQ4_0 && original / d > 7.5;
          // q4_0's d carries the sign that maps the largest magnitude to -8.
          ASSERT_LE(error, (clamped ? 1.0 : 0.5) * std::fabs(d) * (1 + 1e-6) + 1e-30)
              << ToString(format) << " " << r << "," << c;
          squared += error * error;
          steps += d * d;
        }
      }
      // Rounding error is ~uniform over a step: RMS ~ d / sqrt(12) = 0.29 d.
      EXPECT_LT(std::sqrt(squared / steps), 0.35) << ToString(format);
      EXPECT_NEAR(q.StoredBytes(),
                  rows * ((cols + 31) / 32 * 32) * (format == QuantFormat::kQ8_0 ? 8.5 : 4.5) / 8,
                  1e-9);
    }
  }
}

TEST(QuantizedMatrix, PartByPartEqualsWhole) {
  const int64_t rows = 21, cols = 70;
  const std::vector<Bf16> w = RandomWeights(rows * cols, 5);
  for (QuantFormat format : {QuantFormat::kQ8_0, QuantFormat::kQ4_0}) {
    QuantizedMatrix whole(format, rows, cols), parts(format, rows, cols);
    whole.QuantizeRows(0, rows, w.data());
    parts.QuantizeRows(0, 5, w.data());
    parts.QuantizeRows(5, rows - 5, w.data() + 5 * cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(whole.At(r, c), parts.At(r, c));
    }
  }
}

TEST(QuantizedMatrix, RefusesWeightsItCannotQuantize) {
  std::vector<Bf16> w(32, FloatToBf16(1.0f));
  w[3] = FloatToBf16(1.0e30f);  // scale 1e30 / 127: beyond fp16
  QuantizedMatrix q(QuantFormat::kQ8_0, 1, 32);
  EXPECT_THROW(q.QuantizeRows(0, 1, w.data()), base::Error);
  w[3] = FloatToBf16(NAN);
  EXPECT_THROW(q.QuantizeRows(0, 1, w.data()), base::Error);
}

TEST(WeightFormat, FromBitsAcceptsSixteenEightFourOnly) {
  EXPECT_EQ(WeightFormatFromBits(16, "--expert-bits"), WeightFormat::kBf16);
  EXPECT_EQ(WeightFormatFromBits(8, "--expert-bits"), WeightFormat::kQ8_0);
  EXPECT_EQ(WeightFormatFromBits(4, "--expert-bits"), WeightFormat::kQ4_0);
  try {
    WeightFormatFromBits(3, "--attention-bits");
    FAIL() << "3 bits accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-bits 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16 (bf16), 8 (q8_0) or 4 (q4_0)"), std::string::npos)
        << e.what();
  }
}

class QuantizedMatmulTest : public ::testing::TestWithParam<std::tuple<Isa, QuantFormat>> {
 protected:
  void SetUp() override { testing::UseIsaOrSkip(std::get<0>(GetParam())); }
  void TearDown() override { SetActiveIsa(SupportedIsas().back()); }
  QuantFormat format() const { return std::get<1>(GetParam()); }
};

TEST(QuantizedActivations, RoundToNearestEvenIsNearbyint) {
  for (float v = -300.0f; v <= 300.0f; v += 0.125f)
    ASSERT_EQ(RoundToNearestEven(v), std::nearbyint(v)) << v;
  for (float v :
       {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 0.49999997f, 4194303.5f, -4194303.5f, 1e30f, -1e30f}) {
    EXPECT_EQ(RoundToNearestEven(v), std::nearbyint(v)) << v;
  }
}

// Activations per block of 32: |x - d q| <= d / 2, AVX2 == scalar bit for bit (tails, zero and
// subnormal blocks, non-finite blocks -> NaN scale).
TEST(QuantizedActivations, WithinHalfAStepAndSameBitsOnEveryIsa) {
  const int64_t m = 5, k = 200;
  std::vector<float> x = RandomActivations(m * k, 4);
  for (int64_t c = 32; c < 64; ++c) x[c] = 0.0f;                    // token 0, block 1: zero
  for (int64_t c = 64; c < 96; ++c) x[c] = std::ldexp(x[c], -135);  // subnormal scale
  x[k + 40] = INFINITY;                                             // token 1, block 1
  x[2 * k + 199] = NAN;                                             // token 2, the tail block
  ThreadPool pool(2);
  QuantizedActivations scalar;
  ResizeQuantizedActivations(m, k, scalar);
  QuantizeActivationTokensScalar(x.data(), k, 0, m, scalar);
  for (int64_t t = 0; t < m; ++t) {
    for (int64_t c = 0; c < k; ++c) {
      const float d = scalar.token_scales(t)[c / 32];
      if (!std::isfinite(d)) continue;
      ASSERT_LE(std::fabs(scalar.Value(t, c) - x[t * k + c]), 0.5 * d * (1 + 1e-6) + 1e-44)
          << t << "," << c;
    }
    for (int64_t b = 0; b < scalar.blocks; ++b) {
      int32_t sum = 0;
      for (int64_t e = 0; e < 32; ++e) sum += scalar.token_quants(t)[b * 32 + e];
      ASSERT_EQ(sum, scalar.token_sums(t)[b]);
    }
  }
  EXPECT_EQ(scalar.token_scales(0)[1], 0.0f);
  EXPECT_TRUE(std::isnan(scalar.token_scales(1)[1]));
  EXPECT_TRUE(std::isnan(scalar.token_scales(2)[6]));
  for (Isa isa : SupportedIsas()) {
    SetActiveIsa(isa);
    QuantizedActivations active;
    QuantizeActivations(x.data(), m, k, active, pool);
    EXPECT_EQ(active.quants, scalar.quants) << ToString(isa);
    EXPECT_EQ(active.sums, scalar.sums) << ToString(isa);
    EXPECT_EQ(0, std::memcmp(active.scales.data(), scalar.scales.data(),
                             scalar.scales.size() * sizeof(float)))
        << ToString(isa);
  }
  SetActiveIsa(SupportedIsas().back());
}

// Against float64 sums of the dequantized weights times the quantized activations (what the kernel
// computes, up to fp32 rounding), and against the unquantized activations (within the activation
// rounding: sum |w| d_x / 2).
TEST_P(QuantizedMatmulTest, MatchesFloat64ReferenceOnOddShapes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int64_t m : {1, 2, 3, 5, 8, 9, 37}) {
    for (int64_t k : {1, 7, 32, 33, 100, 517}) {
      for (int64_t n : {1, 9, 70}) {
        const std::vector<Bf16> w = RandomWeights(n * k, seed++);
        QuantizedMatrix q(format(), n, k);
        q.QuantizeRows(0, n, w.data());
        const std::vector<float> x = RandomActivations(m * k, seed++);
        QuantizedActivations xq;
        ResizeQuantizedActivations(m, k, xq);
        QuantizeActivationTokensScalar(x.data(), k, 0, m, xq);
        std::vector<float> y(m * n, NAN);
        MatmulQuantized(x.data(), m, q, y.data(), n, pool);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0, magnitude = 0, exact = 0, rounding = 0;
            for (int64_t c = 0; c < k; ++c) {
              const double term = double{xq.Value(i, c)} * double{q.At(j, c)};
              sum += term;
              magnitude += std::fabs(term);
              exact += double{x[i * k + c]} * double{q.At(j, c)};
              rounding += std::fabs(double{q.At(j, c)}) * 0.5 * double{xq.token_scales(i)[c / 32]};
            }
            const double tolerance =
                (static_cast<double>(k) / 32.0 + 4.0) * 6.0e-8 * magnitude + 1e-30;
            ASSERT_NEAR(y[i * n + j], sum, tolerance)
                << ToString(std::get<0>(GetParam())) << " " << ToString(format()) << " m=" << m
                << " k=" << k << " n=" << n;
            ASSERT_NEAR(y[i * n + j], exact, rounding * (1 + 1e-6) + tolerance)
                << "m=" << m << " k=" << k << " n=" << n;
          }
        }
      }
    }
  }
}

TEST_P(QuantizedMatmulTest, NonFiniteActivationPoisonsOnlyItsToken) {
  ThreadPool pool(1);
  const int64_t m = 3, k = 96, n = 20;
  const std::vector<Bf16> w = RandomWeights(n * k, 12);
  QuantizedMatrix q(format(), n, k);
  q.QuantizeRows(0, n, w.data());
  std::vector<float> x = RandomActivations(m * k, 13);
  x[k + 50] = NAN;
  std::vector<float> y(m * n);
  MatmulQuantized(x.data(), m, q, y.data(), n, pool);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(std::isnan(y[i * n + j]), i == 1) << i << "," << j;
  }
}

TEST_P(QuantizedMatmulTest, TokenResultIndependentOfBatchThreadsAndIsa) {
  const int64_t m = 70, k = 1100, n = 300;  // prefill k blocks, several tasks
  const std::vector<Bf16> w = RandomWeights(n * k, 8);
  QuantizedMatrix q(format(), n, k);
  q.QuantizeRows(0, n, w.data());
  const std::vector<float> x = RandomActivations(m * k, 9);
  ThreadPool two(2), three(3), one(1);
  std::vector<float> batched(m * n);
  MatmulQuantized(x.data(), m, q, batched.data(), n, two);
  for (int64_t i : {0, 5, 17, 40, 62}) {
    // 9 and more: the VNNI kernel's chunks of at most 8 on its pair tile (17: 6 + 6 + 5).
    for (int64_t tokens : {1, 2, 3, 4, 5, 8, 9, 12, 17, 8 + 8 + 8 + 1}) {
      if (i + tokens > m) continue;
      std::vector<float> few(tokens * n);
      MatmulQuantized(x.data() + i * k, tokens, q, few.data(), n, tokens == 3 ? three : one);
      ASSERT_EQ(0, std::memcmp(few.data(), batched.data() + i * n, tokens * n * sizeof(float)))
          << "token " << i << " in a batch of " << tokens;
    }
  }
  SetActiveIsa(Isa::kScalar);
  std::vector<float> scalar(m * n);
  MatmulQuantized(x.data(), m, q, scalar.data(), n, two);
  EXPECT_EQ(0, std::memcmp(scalar.data(), batched.data(), batched.size() * sizeof(float)))
      << "differs from scalar";
}

// The largest quants in every position, signs mixed: the integer sums reach their bound (q8_0:
// 32 x 127 x 127 per block; VNNI's biased weight 255 x 127) and must stay exact on every kernel.
TEST_P(QuantizedMatmulTest, ExtremeQuantsSumExactlyAsScalar) {
  const int64_t k = 256, n = 64;
  std::vector<Bf16> w(n * k);
  std::vector<float> x(19 * k);
  for (int64_t i = 0; i < n * k; ++i) w[i] = FloatToBf16(((i / 3) % 2 == 0 ? 1.0f : -1.0f));
  for (int64_t i = 0; i < 19 * k; ++i) x[i] = (i % 5 == 0 ? -1.0f : 1.0f) * 0.5f;
  for (int64_t j = 0; j < k; j += 32) w[j] = FloatToBf16(-1.0f);  // q4_0's block extreme is -8
  QuantizedMatrix q(format(), n, k);
  q.QuantizeRows(0, n, w.data());
  ThreadPool pool(1);
  for (int64_t m : {1, 2, 4, 8, 9, 19}) {
    std::vector<float> y(m * n), scalar(m * n);
    MatmulQuantized(x.data(), m, q, y.data(), n, pool);
    const Isa isa = ActiveIsa();
    SetActiveIsa(Isa::kScalar);
    MatmulQuantized(x.data(), m, q, scalar.data(), n, pool);
    SetActiveIsa(isa);
    ASSERT_EQ(0, std::memcmp(y.data(), scalar.data(), y.size() * sizeof(float)))
        << ToString(ActiveQuantizedKernel()) << " m=" << m;
  }
}

TEST(QuantizedKernelChoice, FollowsTheActiveIsa) {
  for (Isa isa : SupportedIsas()) {
    SetActiveIsa(isa);
    const QuantizedKernel kernel = ActiveQuantizedKernel();
    if (isa == Isa::kScalar) {
      EXPECT_EQ(kernel, QuantizedKernel::kScalar);
    } else if (isa == Isa::kAvx2) {
      EXPECT_EQ(kernel, QuantizedKernel::kAvx2);
    } else {
      EXPECT_NE(kernel, QuantizedKernel::kScalar) << ToString(isa);
    }
  }
  SetActiveIsa(SupportedIsas().back());
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, QuantizedMatmulTest,
                         ::testing::Combine(::testing::ValuesIn(AllIsas()),
                                            ::testing::Values(QuantFormat::kQ8_0,
                                                              QuantFormat::kQ4_0)),
                         [](const auto& info) {
                           return ToString(std::get<0>(info.param)) + "_" +
                                  ToString(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace moelab::kernels
