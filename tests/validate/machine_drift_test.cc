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
  // The rounds spread (0.03 - 0.0099) / 0.01265 = 159 %: a 15 % drift inside it is not applied.
  EXPECT_NEAR(drift.scatter, (0.03 - 0.0099) / 0.01265, 1e-12);
  EXPECT_FALSE(drift.applied);
  EXPECT_EQ(drift.applied_factor(), 1.0);
}

// A drift outside the anchor's scatter across the rounds is applied; one inside it is not.
TEST(MachineDrift, AppliedOnlyOutsideTheAnchorsScatter) {
  MachineDrift slower;
  slower.profile_s = {0.010, 0.010};
  slower.rounds_s = {0.0120, 0.0125, 0.0122, 0.0121};  // +22 %, spread 4 %
  slower.Compute();
  EXPECT_TRUE(slower.applied);
  EXPECT_NEAR(slower.applied_factor(), 0.01215 / 0.010, 1e-12);
  EXPECT_EQ(slower.ToJson()["applied"], true);

  MachineDrift noisy;
  noisy.profile_s = {0.0201, 0.0206};                     // the record run's anchor (s)
  noisy.rounds_s = {0.01846, 0.01813, 0.02036, 0.01647};  // factor 0.90, spread 21 %
  noisy.Compute();
  EXPECT_NEAR(noisy.factor, 0.018295 / 0.02035, 1e-9);
  EXPECT_FALSE(noisy.applied);
  EXPECT_EQ(noisy.applied_factor(), 1.0);
}

// A factor outside the rounds' scatter is still not applied when a round sits on the profile's
// side: the other rounds' slowness was not a shift of the machine (the quick run of 2026-11-27
// 02:13 UTC, in ms: its cases ran at the profile's speed).
TEST(MachineDrift, NotAppliedWhenARoundSitsOnTheProfilesSide) {
  MachineDrift drift;
  drift.profile_s = {0.019980, 0.021550};                     // mean 0.020765
  drift.rounds_s = {0.020626, 0.025122, 0.025451, 0.024496};  // the first below that mean
  drift.Compute();
  EXPECT_NEAR(drift.factor, 0.024809 / 0.020765, 1e-4);  // 1.195
  EXPECT_LT(drift.scatter, drift.factor - 1.0);          // 19.4 %: outside the scatter
  EXPECT_FALSE(drift.one_sided);
  EXPECT_FALSE(drift.applied);
  EXPECT_EQ(drift.ToJson()["one_sided"], false);

  drift.rounds_s[0] = 0.0213;  // above the mean too: a shift
  drift.Compute();
  EXPECT_TRUE(drift.one_sided);
  EXPECT_TRUE(drift.applied);
}

// The compute anchor's drift is computed the same way and reported, never applied.
TEST(MachineDrift, TheComputeAnchorIsReportedBesideTheMemoryAnchor) {
  MachineDrift drift;
  drift.profile_s = {0.010, 0.010};
  drift.rounds_s = {0.0100, 0.0101, 0.0099};  // steady memory speed
  drift.compute_profile_s = {0.004, 0.004};
  drift.compute_rounds_s = {0.0046, 0.0047, 0.0045};  // cores 15 % slower, spread 4.3 %
  drift.Compute();
  EXPECT_TRUE(drift.compute_measured);
  EXPECT_NEAR(drift.compute_factor, 0.0046 / 0.004, 1e-12);
  EXPECT_NEAR(drift.compute_scatter, (0.0047 - 0.0045) / 0.0046, 1e-12);
  EXPECT_EQ(drift.applied_factor(), 1.0);  // the memory anchor alone decides what is applied
  const nlohmann::json json = drift.ToJson();
  ASSERT_TRUE(json.contains("compute"));
  EXPECT_DOUBLE_EQ(json["compute"]["factor"].get<double>(), drift.compute_factor);
  EXPECT_EQ(json["compute"]["applied"], false);

  MachineDrift memory_only;
  memory_only.profile_s = {0.010, 0.010};
  memory_only.rounds_s = {0.0100};
  memory_only.Compute();
  EXPECT_FALSE(memory_only.compute_measured);
  EXPECT_FALSE(memory_only.ToJson().contains("compute"));
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
