// Block-quantized weights (kernels/quantized_matrix.h): round-trip error bounds per format, the
// matmul against a float64 reference of the dequantized weights on odd shapes on every ISA, AVX2 ==
// scalar bit for bit, batch- and thread-invariant tokens, refusals.
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

namespace moelab {
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
  for (uint32_t h = 0; h < 0x7c00; ++h) ASSERT_EQ(FloatToFp16(Fp16ToFloat(static_cast<Fp16>(h))), h) << h;
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
          ASSERT_LE(error, (clamped ? 1.0 : 0.5) * std::fabs(d) * (1 + 1e-6) + 1e-30) << ToString(format) << " " << r << "," << c;
          squared += error * error;
          steps += d * d;
        }
      }
      // Rounding error is ~uniform over a step: RMS ~ d / sqrt(12) = 0.29 d.
      EXPECT_LT(std::sqrt(squared / steps), 0.35) << ToString(format);
      EXPECT_NEAR(q.StoredBytes(), rows * ((cols + 31) / 32 * 32) * (format == QuantFormat::kQ8_0 ? 8.5 : 4.5) / 8, 1e-9);
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
  EXPECT_THROW(q.QuantizeRows(0, 1, w.data()), Error);
  w[3] = FloatToBf16(NAN);
  EXPECT_THROW(q.QuantizeRows(0, 1, w.data()), Error);
}

TEST(WeightFormat, FromBitsAcceptsSixteenEightFourOnly) {
  EXPECT_EQ(WeightFormatFromBits(16, "--expert-bits"), WeightFormat::kBf16);
  EXPECT_EQ(WeightFormatFromBits(8, "--expert-bits"), WeightFormat::kQ8_0);
  EXPECT_EQ(WeightFormatFromBits(4, "--expert-bits"), WeightFormat::kQ4_0);
  try {
    WeightFormatFromBits(3, "--attention-bits");
    FAIL() << "3 bits accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-bits 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("16 (bf16), 8 (q8_0) or 4 (q4_0)"), std::string::npos) << e.what();
  }
}

class QuantizedMatmulTest : public ::testing::TestWithParam<std::tuple<Isa, QuantFormat>> {
 protected:
  void SetUp() override { SetActiveIsa(std::get<0>(GetParam())); }
  void TearDown() override { SetActiveIsa(SupportedIsas().back()); }
  QuantFormat format() const { return std::get<1>(GetParam()); }
};

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
        std::vector<float> y(m * n, NAN);
        MatmulQuantized(x.data(), m, q, y.data(), n, pool);
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double sum = 0, magnitude = 0;
            for (int64_t c = 0; c < k; ++c) {
              const double term = double{Bf16ToFloat(FloatToBf16(x[i * k + c]))} * double{q.At(j, c)};
              sum += term;
              magnitude += std::fabs(term);
            }
            ASSERT_NEAR(y[i * n + j], sum, (static_cast<double>(k) + 16.0) * 6.0e-8 * magnitude + 1e-30)
                << ToString(std::get<0>(GetParam())) << " " << ToString(format()) << " m=" << m << " k=" << k << " n=" << n;
          }
        }
      }
    }
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
  for (int64_t i : {0, 5, 17, 40, 66}) {
    for (int64_t tokens : {1, 2, 3, 4}) {
      std::vector<float> few(tokens * n);
      MatmulQuantized(x.data() + i * k, tokens, q, few.data(), n, tokens == 3 ? three : one);
      ASSERT_EQ(0, std::memcmp(few.data(), batched.data() + i * n, tokens * n * sizeof(float)))
          << "token " << i << " in a batch of " << tokens;
    }
  }
  SetActiveIsa(Isa::kScalar);
  std::vector<float> scalar(m * n);
  MatmulQuantized(x.data(), m, q, scalar.data(), n, two);
  EXPECT_EQ(0, std::memcmp(scalar.data(), batched.data(), batched.size() * sizeof(float))) << "differs from scalar";
}

INSTANTIATE_TEST_SUITE_P(
    EverySupportedIsa, QuantizedMatmulTest,
    ::testing::Combine(::testing::ValuesIn(SupportedIsas()), ::testing::Values(QuantFormat::kQ8_0, QuantFormat::kQ4_0)),
    [](const auto& info) { return ToString(std::get<0>(info.param)) + "_" + ToString(std::get<1>(info.param)); });

}  // namespace
}  // namespace moelab
