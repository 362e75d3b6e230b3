#include "fit/metrics.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::fit {
namespace {

// Hand computation: errors 0.1, -0.2, 0.4 on measurements 1, 2, 4.
//   rmse = sqrt((0.01 + 0.04 + 0.16) / 3) = sqrt(0.07)
//   mape = 100 * mean(0.1/1, 0.2/2, 0.4/4) = 10 %
//   r2   = 1 - 0.21 / sum((m - 7/3)^2) = 1 - 0.21 / (14/3) = 0.955
TEST(FitMetrics, MatchHandComputation) {
  const FitMetrics m = ComputeMetrics({1, 2, 4}, {1.1, 1.8, 4.4});
  EXPECT_NEAR(m.rmse, std::sqrt(0.07), 1e-12);
  EXPECT_NEAR(m.mape, 10.0, 1e-12);
  ASSERT_TRUE(m.r2.has_value());
  EXPECT_NEAR(*m.r2, 0.955, 1e-12);
}

TEST(FitMetrics, PerfectPredictionAndNoSpread) {
  const FitMetrics perfect = ComputeMetrics({1, 2, 3}, {1, 2, 3});
  EXPECT_EQ(perfect.rmse, 0);
  EXPECT_EQ(perfect.mape, 0);
  EXPECT_EQ(*perfect.r2, 1);
  // Constant measurements: R^2 is undefined and reported as absent, never NaN.
  const FitMetrics flat = ComputeMetrics({2, 2, 2}, {2, 2.2, 1.8});
  EXPECT_FALSE(flat.r2.has_value());
  EXPECT_NEAR(flat.mape, 100.0 * (0.1 + 0.1) / 3, 1e-12);
}

TEST(FitMetrics, RefusesBadInput) {
  EXPECT_THROW(ComputeMetrics({}, {}), base::Error);
  EXPECT_THROW(ComputeMetrics({1, 2}, {1}), base::Error);
  EXPECT_THROW(ComputeMetrics({1, NAN}, {1, 2}), base::Error);
  EXPECT_THROW(ComputeMetrics({0, 1}, {1, 1}), base::Error);  // MAPE undefined
}

TEST(CrossValidationFolds, LeaveOneOutUpToSixtyThenFiveFold) {
  const auto loo = CrossValidationFolds(3);
  ASSERT_EQ(loo.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(loo[static_cast<size_t>(i)], std::vector<int>{i});
  EXPECT_EQ(CrossValidationFolds(60).size(), 60u);
  const auto five = CrossValidationFolds(61);
  ASSERT_EQ(five.size(), 5u);
  EXPECT_EQ(five[0].size(), 13u);  // 0, 5, ..., 60
  EXPECT_EQ(five[1].front(), 1);
  EXPECT_EQ(five[4].back(), 59);
  EXPECT_THROW(CrossValidationFolds(1), base::Error);
}

}  // namespace
}  // namespace moelab::fit
