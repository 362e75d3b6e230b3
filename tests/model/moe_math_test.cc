#include "model/moe_math.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::model {
namespace {

TEST(ExpectedActivatedExperts, MatchesClosedFormAndLimits) {
  EXPECT_DOUBLE_EQ(ExpectedActivatedExperts(0, 8, 2), 0.0);
  EXPECT_DOUBLE_EQ(ExpectedActivatedExperts(1, 8, 2), 2.0);  // one token activates exactly K
  EXPECT_NEAR(ExpectedActivatedExperts(2, 8, 2), 8.0 * (1.0 - 0.75 * 0.75), 1e-12);
  EXPECT_NEAR(ExpectedActivatedExperts(1000, 64, 8), 64.0, 1e-9);
  EXPECT_DOUBLE_EQ(ExpectedActivatedExperts(3, 8, 8), 8.0);  // K = E: all active
  // Monotone in tokens.
  double previous = 0;
  for (int t = 1; t < 64; ++t) {
    const double n = ExpectedActivatedExperts(t, 160, 6);
    EXPECT_GT(n, previous);
    previous = n;
  }
}

TEST(ExpectedActivatedExperts, RefusesImpossibleGates) {
  EXPECT_THROW(ExpectedActivatedExperts(4, 8, 9), base::Error);   // K > E
  EXPECT_THROW(ExpectedActivatedExperts(4, 8, 0), base::Error);   // K = 0
  EXPECT_THROW(ExpectedActivatedExperts(-1, 8, 2), base::Error);  // negative tokens
  EXPECT_THROW(ExpectedActivatedExperts(NAN, 8, 2), base::Error);
}

TEST(TokensPerActivatedExpert, EqualsTKOverN) {
  for (double t : {1.0, 2.0, 7.0, 64.0, 1000.0}) {
    EXPECT_NEAR(TokensPerActivatedExpert(t, 2.0 / 8.0), t * 2.0 / ExpectedActivatedExperts(t, 8, 2),
                1e-9);
  }
  EXPECT_NEAR(TokensPerActivatedExpert(1, 0.125), 1.0, 1e-12);
}

TEST(TokensPerActivatedExpert, IncreasesWithSparsityRatioRhoForMoreThanOneToken) {
  for (double t : {2.0, 4.0, 16.0, 256.0}) {
    double previous = 0;
    for (double rho : {1.0 / 256, 1.0 / 64, 1.0 / 16, 1.0 / 8, 0.25, 0.5, 0.75, 1.0}) {
      const double texp = TokensPerActivatedExpert(t, rho);
      EXPECT_GT(texp, previous) << "t=" << t << " rho=" << rho;
      previous = texp;
    }
  }
}

TEST(FullActivationThreshold, PublishedModels) {
  // Mixtral-8x7B: rho = 2/8; log(0.05)/log(0.75) = 10.41 -> 11.
  EXPECT_EQ(FullActivationThreshold(2.0 / 8.0, 0.95), 11);
  // Qwen2-57B-A14B: rho = 8/64; log(0.05)/log(0.875) = 22.43 -> 23.
  EXPECT_EQ(FullActivationThreshold(8.0 / 64.0, 0.95), 23);
  // DeepSeek-V2: rho = 6/160 -> 79.
  EXPECT_EQ(FullActivationThreshold(6.0 / 160.0, 0.95), 79);
  // At T_thres the expected activated fraction reaches tau, one token earlier it does not.
  const int64_t t = FullActivationThreshold(0.25, 0.95);
  EXPECT_GE(ExpectedActivatedExperts(static_cast<double>(t), 8, 2) / 8.0, 0.95);
  EXPECT_LT(ExpectedActivatedExperts(static_cast<double>(t - 1), 8, 2) / 8.0, 0.95);
  EXPECT_EQ(FullActivationThreshold(1.0, 0.95), 1);  // dense
  // An exact power: rho = 0.5, tau = 0.75 -> log(0.25)/log(0.5) = 2 exactly.
  EXPECT_EQ(FullActivationThreshold(0.5, 0.75), 2);
  EXPECT_THROW(FullActivationThreshold(0.25, 1.0), base::Error);
  EXPECT_THROW(FullActivationThreshold(0.0, 0.95), base::Error);
}

TEST(AcceptedLengthFraction, LimitsAndClosedForm) {
  for (int64_t gamma : {1, 2, 4, 8}) {
    const double n = static_cast<double>(gamma + 1);
    EXPECT_DOUBLE_EQ(AcceptedLengthFraction(0.0, gamma), 1.0 / n);      // nothing accepted
    EXPECT_NEAR(AcceptedLengthFraction(1.0 - 1e-9, gamma), 1.0, 1e-6);  // alpha -> 1
    double sum = 0;
    for (int i = 0; i <= gamma; ++i) sum += std::pow(0.7, i);
    EXPECT_NEAR(AcceptedLengthFraction(0.7, gamma), sum / n, 1e-12);
    EXPECT_NEAR(ExpectedTokensPerRound(0.7, gamma), sum, 1e-12);
  }
  // Monotone in alpha, and sigma falls with gamma at fixed alpha < 1.
  EXPECT_LT(AcceptedLengthFraction(0.5, 4), AcceptedLengthFraction(0.6, 4));
  EXPECT_GT(AcceptedLengthFraction(0.5, 2), AcceptedLengthFraction(0.5, 6));
}

TEST(AcceptedLengthFraction, RefusesOutOfRange) {
  EXPECT_THROW(AcceptedLengthFraction(1.0, 4), base::Error);
  EXPECT_THROW(AcceptedLengthFraction(-0.1, 4), base::Error);
  EXPECT_THROW(AcceptedLengthFraction(0.5, 0), base::Error);
}

TEST(RooflineCurve, ContinuousInValueAndSlopeAtTransition) {
  const RooflineCurve curve{37.5, 1.03};
  const double p = curve.transition_point;
  const double eps = 1e-7;
  EXPECT_NEAR(curve.Value(p - eps), curve.Value(p + eps), 1e-5);
  EXPECT_NEAR(curve.Slope(p - eps), curve.Slope(p + eps), 1e-6);
  // Numeric derivative on either side equals the analytic slope.
  const double h = 1e-5;
  EXPECT_NEAR((curve.Value(p - h) - curve.Value(p - 2 * h)) / h, curve.Slope(p), 1e-4);
  EXPECT_NEAR((curve.Value(p + 2 * h) - curve.Value(p + h)) / h, curve.Slope(p), 1e-4);
  // Exponential below, linear above.
  EXPECT_NEAR(curve.Value(10), std::pow(1.03, 10), 1e-12);
  EXPECT_NEAR(curve.Value(100) - curve.Value(90), 10 * curve.Slope(p), 1e-9);
  // s = 1: flat.
  const RooflineCurve flat{10, 1.0};
  EXPECT_DOUBLE_EQ(flat.Value(3), 1.0);
  EXPECT_DOUBLE_EQ(flat.Value(300), 1.0);
}

}  // namespace
}  // namespace moelab::model
