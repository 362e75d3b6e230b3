// EngineWake: its magnitude from samples against their baseline, its factor, and the pricer that
// applies it in a simulation, worked out by hand.
#include "validate/engine_wake.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "base/error.h"
#include "sim/serving_simulator.h"

namespace moelab::validate {
namespace {

double Shape(double idle_s) { return 1 - std::exp(-idle_s / EngineWake::kTimeConstantS); }

TEST(EngineWake, MagnitudeIsTheMedianOverSamplesRelativeToTheShortIdleBaseline) {
  // Baseline (under 0.1 s): ratios 1.2, 1.1, 1.3 -> 1.2. The others, relative to it, each imply
  // a magnitude (f - 1) / shape(idle); their median is the one made to be 0.5 (the middle one).
  const double w = 0.5;
  const EngineWake wake = EngineWake::FromSamples({{0.05, 1.2},
                                                   {0.6, 1.2 * (1 + 0.1 * Shape(0.6))},
                                                   {0.02, 1.1},
                                                   {0.3, 1.2 * (1 + w * Shape(0.3))},
                                                   {0.08, 1.3},
                                                   {1.2, 1.2 * (1 + 0.9 * Shape(1.2))}});
  EXPECT_NEAR(wake.baseline_ratio, 1.2, 1e-12);
  EXPECT_EQ(wake.baseline_samples, 3);
  EXPECT_EQ(wake.samples, 6);
  EXPECT_NEAR(wake.magnitude, w, 1e-12);
}

TEST(EngineWake, AMachineSlowThroughoutTheMeasurementCancels) {
  // Every ratio twice as high (a slow stretch): the same magnitude.
  const EngineWake fast = EngineWake::FromSamples({{0.05, 1.0}, {0.5, 1.3}});
  const EngineWake slow = EngineWake::FromSamples({{0.05, 2.0}, {0.5, 2.6}});
  EXPECT_NEAR(fast.magnitude, slow.magnitude, 1e-12);
  EXPECT_NEAR(fast.magnitude, 0.3 / Shape(0.5), 1e-12);
}

TEST(EngineWake, FactorIsOneAtZeroAndRisesToOnePlusTheMagnitude) {
  EngineWake wake;
  wake.magnitude = 0.4;
  EXPECT_EQ(wake.Factor(0), 1);  // back to back: nothing to wake
  EXPECT_NEAR(wake.Factor(0.4), 1 + 0.4 * (1 - std::exp(-1.0)), 1e-12);
  EXPECT_NEAR(wake.Factor(std::numeric_limits<double>::max()), 1.4, 1e-12);
  EXPECT_EQ(EngineWake{}.Factor(1.0), 1);  // nothing measured: no term
}

TEST(WakingPricer, MultipliesTheIterationsThatFollowIdlenessInASimulation) {
  // Fixed 0.1 s iterations; each request 1 prompt-token prefill + 1 token: one iteration. The
  // wake: magnitude 0.5. Request 0 at t = 0 (the replica's first iteration: x1.5, 0.15 s),
  // request 1 at t = 0.55 (idle 0.4 s: x(1 + 0.5 (1 - 1/e)), request 2 arriving while request 1
  // runs (back to back after it: x1).
  sim::ServingSimOptions options;
  options.scheduler.kv_blocks = 64;
  options.scheduler.max_running_sequences = 1;
  sim::FixedIterationPricer fixed(0.1);
  EngineWake wake;
  wake.magnitude = 0.5;
  WakingPricer pricer(fixed, wake);
  const sim::ServingSimResult result =
      sim::SimulateServing({{0, 0, 1, 1}, {1, 0.55, 1, 1}, {2, 0.56, 1, 1}}, options, pricer);
  ASSERT_EQ(result.outcomes.size(), 3u);
  const double second = 0.1 * (1 + 0.5 * (1 - std::exp(-1.0)));
  EXPECT_NEAR(result.outcomes[0].first_token_s, 0.15, 1e-12);
  EXPECT_NEAR(result.outcomes[1].first_token_s, 0.55 + second, 1e-12);
  EXPECT_NEAR(result.outcomes[2].first_token_s, 0.55 + second + 0.1, 1e-12);
  // Without a wake the same queue runs at the fixed price.
  sim::FixedIterationPricer plain(0.1);
  EXPECT_NEAR(sim::SimulateServing({{0, 0, 1, 1}, {1, 0.55, 1, 1}}, options, plain)
                  .outcomes[1]
                  .first_token_s,
              0.65, 1e-12);
}

TEST(EngineWake, RefusesMeasurementsItCannotUse) {
  const auto message = [](const std::vector<EngineWake::Sample>& samples) {
    try {
      EngineWake::FromSamples(samples);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({{0.5, 1.1}, {0.8, 1.2}}).find("0 of 2 woken iterations after under"),
            std::string::npos);
  EXPECT_NE(message({{0.05, 1.1}}).find("1 of 1 woken iterations"), std::string::npos);
  EXPECT_NE(message({{-0.1, 1.1}, {0.5, 1.0}}).find("idle time"), std::string::npos);
  EXPECT_NE(message({{0.05, 0}, {0.5, 1.0}}).find("expected a finite ratio > 0"),
            std::string::npos);
  EXPECT_NE(message({{0.05, std::numeric_limits<double>::quiet_NaN()}, {0.5, 1.0}})
                .find("expected a finite ratio > 0"),
            std::string::npos);
  // Woken iterations at a tenth of the baseline imply a factor that reaches 0.
  EXPECT_NE(message({{0.05, 1.0}, {0.2, 0.1}}).find("a noisy measurement"), std::string::npos);
  EXPECT_THROW(EngineWake{}.Factor(-1), base::Error);
  EXPECT_THROW(EngineWake{}.Factor(std::numeric_limits<double>::infinity()), base::Error);
}

}  // namespace
}  // namespace moelab::validate
