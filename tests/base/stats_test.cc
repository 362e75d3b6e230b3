#include "base/stats.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::base {
namespace {

TEST(Median, MiddleValueOrMeanOfTheTwoMiddleOnes) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({5}), 5);
  EXPECT_THROW(Median({}), Error);
}

TEST(Quantile, InterpolatesBetweenOrderStatistics) {
  EXPECT_EQ(Quantile({3, 1, 2}, 0.5), 2.0);
  EXPECT_EQ(Quantile({1, 2, 3, 4}, 0.5), 2.5);
  EXPECT_EQ(Quantile({1, 2, 3, 4}, 0.0), 1.0);
  EXPECT_EQ(Quantile({1, 2, 3, 4}, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(Quantile({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.9), 9.1);
  EXPECT_EQ(Quantile({5}, 0.9), 5.0);
  EXPECT_THROW(Quantile({}, 0.5), Error);
  EXPECT_THROW(Quantile({1}, 1.5), Error);
  EXPECT_THROW(Quantile({1}, -0.1), Error);
}

// The two medians are different roundings of the same value: 0.5 * (a + b) and a + (b - a) / 2.
// Callers pick one on purpose (base/stats.h); this pins that they are not interchangeable.
TEST(Median, DiffersFromTheInterpolatedHalfQuantileInTheLastBit) {
  const double a = 0.1, b = 0.7;
  EXPECT_EQ(Median({a, b}), 0.5 * (a + b));
  EXPECT_EQ(Quantile({a, b}, 0.5), a + (b - a) * 0.5);
  EXPECT_NE(Median({a, b}), Quantile({a, b}, 0.5));
}

// Two-sided binomial tails at 1/2: 3 of 3 is 2/8, 9 of 9 is 2/512, 5 of 9 is everything.
TEST(SignTest, TwoSidedBinomialTails) {
  EXPECT_DOUBLE_EQ(SignTestP(3, 3), 0.25);
  EXPECT_DOUBLE_EQ(SignTestP(0, 3), 0.25);
  EXPECT_NEAR(SignTestP(9, 9), 2.0 / 512, 1e-15);
  EXPECT_NEAR(SignTestP(8, 9), 2.0 * 10 / 512, 1e-15);
  EXPECT_EQ(SignTestP(5, 9), 1.0);
  EXPECT_EQ(SignTestP(0, 0), 1.0);
  EXPECT_THROW(SignTestP(4, 3), Error);
}

}  // namespace
}  // namespace moelab::base
