#include "kernels/matmul.h"

#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu_features.h"
#include "kernels/weight_matrix.h"
#include "tests/kernels/random_inputs.h"

namespace moelab::kernels {
namespace {

struct Problem {
  int64_t m, k, n;
  std::vector<float> x;
  std::vector<Bf16> w;
};

Problem MakeProblem(int64_t m, int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Problem p{m, k, n, std::vector<float>(m * k), std::vector<Bf16>(n * k)};
  for (float& v : p.x) v = normal(rng);
  for (Bf16& v : p.w) v = FloatToBf16(normal(rng) * 0.05f);
  return p;
}

// float64 reference on the bf16-rounded activations (what the kernel multiplies).
void Reference(const Problem& p, std::vector<double>& y, std::vector<double>& magnitude) {
  y.assign(p.m * p.n, 0.0);
  magnitude.assign(p.m * p.n, 0.0);
  for (int64_t i = 0; i < p.m; ++i) {
    for (int64_t j = 0; j < p.n; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const double term = static_cast<double>(Bf16ToFloat(FloatToBf16(p.x[i * p.k + kk]))) *
                            static_cast<double>(Bf16ToFloat(p.w[j * p.k + kk]));
        sum += term;
        abs_sum += std::fabs(term);
      }
      y[i * p.n + j] = sum;
      magnitude[i * p.n + j] = abs_sum;
    }
  }
}

class MatmulTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { testing::UseIsaOrSkip(GetParam()); }
  void TearDown() override { SetActiveIsa(SupportedIsas().back()); }
};

TEST_P(MatmulTest, MatchesFloat64ReferenceOnOddShapes) {
  ThreadPool pool(2);
  uint32_t seed = 1;
  for (int64_t m : {1, 2, 3, 4, 5, 8, 9, 13, 37, 130}) {
    for (int64_t k : {1, 7, 31, 32, 33, 100, 513, 1030, 2081}) {
      for (int64_t n : {1, 3, 5, 33, 70}) {
        const Problem p = MakeProblem(m, k, n, seed++);
        std::vector<float> y(m * n, NAN);
        MatmulBf16(p.x.data(), m, k, p.w.data(), n, y.data(), n, pool);
        std::vector<double> reference, magnitude;
        Reference(p, reference, magnitude);
        for (int64_t e = 0; e < m * n; ++e) {
          // fp32 accumulation of k exact products: error <= ~k * 2^-24 * sum |terms|.
          const double tolerance = (static_cast<double>(k) + 16.0) * 6.0e-8 * magnitude[e] + 1e-30;
          ASSERT_NEAR(y[e], reference[e], tolerance)
              << ToString(GetParam()) << " m=" << m << " k=" << k << " n=" << n << " element " << e;
        }
      }
    }
  }
}

class MatmulDeterminismTest : public ::testing::TestWithParam<std::tuple<Isa, int64_t>> {
 protected:
  void SetUp() override { testing::UseIsaOrSkip(std::get<0>(GetParam())); }
  void TearDown() override { SetActiveIsa(SupportedIsas().back()); }
};

// k = 777 takes the register-tile path at every batch size; k = 3000 the k-blocked path for
// batches above 8.
TEST_P(MatmulDeterminismTest, TokenResultIndependentOfBatchAndThreads) {
  const int64_t m = 141, k = std::get<1>(GetParam()), n = 300;
  const Problem p = MakeProblem(m, k, n, 99);
  ThreadPool two(2), three(3), one(1);
  std::vector<float> batched(m * n);
  MatmulBf16(p.x.data(), m, k, p.w.data(), n, batched.data(), n, two);
  for (int64_t i : {0, 5, 17, 40, 99, 137}) {
    std::vector<float> alone(n);
    MatmulBf16(p.x.data() + i * k, 1, k, p.w.data(), n, alone.data(), n, one);
    EXPECT_EQ(0, std::memcmp(alone.data(), batched.data() + i * n, n * sizeof(float)))
        << "token " << i;
    std::vector<float> few(3 * n);
    if (i + 3 <= m) {
      MatmulBf16(p.x.data() + i * k, 3, k, p.w.data(), n, few.data(), n, three);
      EXPECT_EQ(0, std::memcmp(few.data(), batched.data() + i * n, 3 * n * sizeof(float)))
          << "token " << i;
    }
    // 9-24 tokens: chunked decode on some ISAs (kernels/matmul_internal.h), prefill on others.
    for (int64_t tokens : {12, 17, 24}) {
      if (i + tokens > m) continue;
      std::vector<float> chunked(tokens * n);
      MatmulBf16(p.x.data() + i * k, tokens, k, p.w.data(), n, chunked.data(), n, two);
      EXPECT_EQ(0, std::memcmp(chunked.data(), batched.data() + i * n, tokens * n * sizeof(float)))
          << "token " << i << ", " << tokens << " tokens";
    }
  }
}

TEST_P(MatmulTest, WritesIntoStridedOutput) {
  const Problem p = MakeProblem(3, 64, 10, 5);
  ThreadPool pool(2);
  std::vector<float> y(3 * 16, -7.0f);
  MatmulBf16(p.x.data(), 3, 64, p.w.data(), 10, y.data(), 16, pool);
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 10; j < 16; ++j) EXPECT_EQ(y[i * 16 + j], -7.0f);  // padding untouched
  }
}

// The tiling the cost model prices tokens by (kernels/weight_matrix.h) is the dispatch's: on
// AVX512-BF16, bf16 calls above the chunked-decode limit run the prefill tile of 16-token vectors;
// every other path and format computes exactly its tokens.
TEST_P(MatmulTest, DeclaresTheTokenTilingItDispatches) {
  const TokenTiling bf16 = MatmulTokenTiling(WeightFormat::kBf16);
  for (WeightFormat quantized : {WeightFormat::kQ8_0, WeightFormat::kQ4_0}) {
    EXPECT_TRUE(MatmulTokenTiling(quantized).exact()) << ToString(quantized);
    EXPECT_EQ(MatmulTokenTiling(quantized).ComputedTokens(53), 53);
  }
  if (GetParam() != Isa::kAvx512Bf16) {
    EXPECT_TRUE(bf16.exact());
    for (int64_t tokens : {1, 8, 25, 53, 257}) EXPECT_EQ(bf16.ComputedTokens(tokens), tokens);
    return;
  }
  EXPECT_EQ(bf16.exact_up_to, 24);
  EXPECT_EQ(bf16.multiple, 16);
  for (const auto& [tokens, computed] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {9, 9}, {24, 24}, {25, 32}, {32, 32}, {33, 48}, {49, 64}, {64, 64}, {65, 80}}) {
    EXPECT_EQ(bf16.ComputedTokens(tokens), computed) << tokens << " tokens";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, MatmulTest, ::testing::ValuesIn(AllIsas()),
                         [](const auto& info) { return ToString(info.param); });
INSTANTIATE_TEST_SUITE_P(EveryIsa, MatmulDeterminismTest,
                         ::testing::Combine(::testing::ValuesIn(AllIsas()),
                                            ::testing::Values(int64_t{777}, int64_t{3000})),
                         [](const auto& info) {
                           return ToString(std::get<0>(info.param)) + "_k" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
  EXPECT_EQ(Bf16ToFloat(FloatToBf16(INFINITY)), INFINITY);
}

}  // namespace
}  // namespace moelab::kernels
