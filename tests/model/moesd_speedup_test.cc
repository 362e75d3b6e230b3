#include "model/moesd_speedup.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/moe_math.h"

namespace moelab::model {
namespace {

MoesdParams Example() {
  MoesdParams p;
  p.values = {0.020, 0.001, 0.0002, 0.0005, 0.004, 0.0001, 0.0005, 0.00001, 0.5, 1.02};
  return p;
}

TEST(MoesdSpeedup, MatchesHandComputationForBothDenominators) {
  const MoesdParams p = Example();
  const SdPoint point{8, 3, 2, 8, 0.6};
  const double ridge = 100;
  const RooflineCurve g{p.values[8] * ridge, p.values[9]};
  const double n_ar = ExpectedActivatedExperts(8, 8, 2);
  const double n_sd = ExpectedActivatedExperts(24, 8, 2);
  const double ar = 0.020 + 0.001 * g.Value(8) + 0.0002 * n_ar + 0.0005 * g.Value(8 * 2 / n_ar);
  const double verify =
      0.020 + 0.001 * g.Value(24) + 0.0002 * n_sd + 0.0005 * g.Value(24 * 2 / n_sd);
  const double draft = 0.004 + 0.0001 * g.Value(8);
  const double reject = 0.0005 + 0.00001 * 8;
  EXPECT_NEAR(MoesdSpeedup(p, point, ridge, SdDenominator::kAlgorithm1),
              0.6 * 4 * ar / (draft + ar + verify + reject), 1e-12);
  EXPECT_NEAR(MoesdSpeedup(p, point, ridge, SdDenominator::kEquation4),
              0.6 * 4 * ar / (3 * draft + verify + reject), 1e-12);
}

TEST(MoesdSpeedup, RisesWithSigma) {
  const MoesdParams p = Example();
  SdPoint point{4, 4, 2, 8, 0.3};
  const double low = MoesdSpeedup(p, point, 100, SdDenominator::kEquation4);
  point.sigma = 0.8;
  EXPECT_GT(MoesdSpeedup(p, point, 100, SdDenominator::kEquation4), low);
}

TEST(SdDenominator, ParsesNames) {
  EXPECT_EQ(SdDenominatorFromString("algorithm1"), SdDenominator::kAlgorithm1);
  EXPECT_EQ(SdDenominatorFromString("equation4"), SdDenominator::kEquation4);
  EXPECT_EQ(ToString(SdDenominator::kEquation4), "equation4");
  EXPECT_THROW(SdDenominatorFromString("eq4"), base::Error);
}

}  // namespace
}  // namespace moelab::model
