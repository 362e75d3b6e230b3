// EngineWake: its points from grouped samples and its interpolation, worked out by hand.
#include "validate/engine_wake.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "base/error.h"
#include "sim/serving_simulator.h"

namespace moelab::validate {
namespace {

TEST(EngineWake, GroupsSamplesByIdleTimeIntoMedians) {
  // Seven samples in any order; groups of 3 by idle time: the first three, then the last four
  // (a remainder of one joins the last group).
  const EngineWake wake = EngineWake::FromSamples(
      {{0.9, 1.30}, {0.1, 1.04}, {1.1, 1.50}, {0.2, 1.10}, {0.05, 0.98}, {1.0, 1.40}, {1.3, 1.45}},
      3);
  EXPECT_EQ(wake.samples, 7);
  ASSERT_EQ(wake.points.size(), 2u);
  EXPECT_NEAR(wake.points[0].first, 0.1, 1e-12);
  EXPECT_NEAR(wake.points[0].second, 1.04, 1e-12);
  EXPECT_NEAR(wake.points[1].first, (1.0 + 1.1) / 2, 1e-12);  // 0.9, 1.0, 1.1, 1.3
  EXPECT_NEAR(wake.points[1].second, (1.40 + 1.45) / 2, 1e-12);
}

TEST(EngineWake, InterpolatesFromOneAtZeroAndHoldsTheLastPoint) {
  EngineWake wake;
  wake.points = {{0.2, 1.10}, {0.6, 1.30}};
  EXPECT_EQ(wake.Factor(0), 1);  // back to back: nothing to wake
  EXPECT_NEAR(wake.Factor(0.1), 1.05, 1e-12);
  EXPECT_NEAR(wake.Factor(0.2), 1.10, 1e-12);
  EXPECT_NEAR(wake.Factor(0.4), 1.20, 1e-12);
  EXPECT_NEAR(wake.Factor(5.0), 1.30, 1e-12);
  EXPECT_NEAR(wake.Factor(std::numeric_limits<double>::max()), 1.30, 1e-12);
  EXPECT_EQ(EngineWake{}.Factor(1.0), 1);  // nothing measured: no term
}

TEST(EngineWake, TwoGroupsAtOneIdleTimeTakeTheFirstsRatio) {
  EngineWake wake;
  wake.points = {{0.3, 1.1}, {0.3, 1.2}, {0.6, 1.4}};
  EXPECT_NEAR(wake.Factor(0.3), 1.1, 1e-12);
  EXPECT_NEAR(wake.Factor(0.45), 1.3, 1e-12);
}

TEST(WakingPricer, MultipliesTheIterationsThatFollowIdlenessInASimulation) {
  // Fixed 0.1 s iterations; each request 1 prompt-token prefill + 1 token: one iteration. The
  // wake: x1.5 after 1 s idle (x1 at 0, linear between). Request 0 at t = 0 (the replica's first
  // iteration: the last point's x1.5, 0.15 s), request 1 at t = 0.65 (idle 0.5 s: x1.25, 0.125 s,
  // ending 0.775), request 2 at t = 0.7 (waits; back to back after request 1: x1, ending 0.875).
  sim::ServingSimOptions options;
  options.scheduler.kv_blocks = 64;
  options.scheduler.max_running_sequences = 1;
  sim::FixedIterationPricer fixed(0.1);
  EngineWake wake;
  wake.points = {{1.0, 1.5}};
  WakingPricer pricer(fixed, wake);
  const sim::ServingSimResult result =
      sim::SimulateServing({{0, 0, 1, 1}, {1, 0.65, 1, 1}, {2, 0.7, 1, 1}}, options, pricer);
  ASSERT_EQ(result.outcomes.size(), 3u);
  EXPECT_NEAR(result.outcomes[0].first_token_s, 0.15, 1e-12);
  EXPECT_NEAR(result.outcomes[1].first_token_s, 0.775, 1e-12);
  EXPECT_NEAR(result.outcomes[2].first_token_s, 0.875, 1e-12);
  // Without a wake the same queue runs at the fixed price.
  sim::FixedIterationPricer plain(0.1);
  EXPECT_NEAR(sim::SimulateServing({{0, 0, 1, 1}, {1, 0.65, 1, 1}}, options, plain)
                  .outcomes[1]
                  .first_token_s,
              0.75, 1e-12);
}

TEST(EngineWake, RefusesBadSamplesAndIdleTimes) {
  EXPECT_THROW(EngineWake::FromSamples({{0.1, 1.1}}, 0), base::Error);
  EXPECT_THROW(EngineWake::FromSamples({{-0.1, 1.1}}, 1), base::Error);
  EXPECT_THROW(EngineWake::FromSamples({{0.1, 0}}, 1), base::Error);
  EXPECT_THROW(EngineWake::FromSamples({{0.1, std::numeric_limits<double>::quiet_NaN()}}, 1),
               base::Error);
  EXPECT_THROW(EngineWake{}.Factor(-1), base::Error);
  EXPECT_THROW(EngineWake{}.Factor(std::numeric_limits<double>::infinity()), base::Error);
  try {
    EngineWake::FromSamples({{0.1, 1.1}}, 3);
    ADD_FAILURE() << "one sample made a group of 3";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 wakes measured, fewer than one group of 3"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace moelab::validate
