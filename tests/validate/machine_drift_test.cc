// The machine-drift factor: the anchor's median time during the runs over its mean time around the
// profile; not measured (factor 1) without both; bad times refused.
#include "validate/machine_drift.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::validate {
namespace {

TEST(MachineDrift, FactorIsTheRoundsMedianOverTheProfilesMean) {
  MachineDrift drift;
  drift.profile_s = {0.010, 0.012};                 // mean 0.011
  drift.rounds_s = {0.0132, 0.0099, 0.0121, 0.03};  // median 0.01265
  drift.Compute();
  EXPECT_TRUE(drift.measured);
  EXPECT_NEAR(drift.factor, 0.01265 / 0.011, 1e-12);
  EXPECT_EQ(drift.ToJson()["factor"], drift.factor);
}

TEST(MachineDrift, WithoutTheProfilesAnchorNothingIsAdjusted) {
  MachineDrift drift;
  drift.rounds_s = {0.01, 0.02};
  drift.Compute();
  EXPECT_FALSE(drift.measured);
  EXPECT_EQ(drift.factor, 1.0);
}

TEST(MachineDrift, RefusesNonPositiveTimes) {
  MachineDrift drift;
  drift.profile_s = {0.01, 0.0};
  drift.rounds_s = {0.01};
  EXPECT_THROW(drift.Compute(), base::Error);
}

}  // namespace
}  // namespace moelab::validate
