// validate --cases serving's arithmetic on fixed inputs, every expected value worked out by hand.
#include "validate/serving_judge.h"
#include "validate/serving_validation.h"

#include <array>
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::validate {
namespace {

TEST(ServingJudge, CrossingInterpolatesBetweenTheRatesAround) {
  // p99 0.2 s at 3/s, 0.5 s at 7/s, 2.0 s at 11/s; SLO 1.0 s lies a third of the way from 0.5 to
  // 2.0, so at 7 + (1.0 - 0.5) / (2.0 - 0.5) x 4 = 8.333/s.
  const auto rate = CrossingRate({3, 7, 11}, {0.2, 0.5, 2.0}, 1.0);
  ASSERT_TRUE(rate.has_value());
  EXPECT_NEAR(*rate, 7 + 4.0 / 3.0, 1e-12);
  // Exactly at a measured point: that rate.
  EXPECT_NEAR(*CrossingRate({3, 7, 11}, {0.2, 0.5, 2.0}, 0.5), 7, 1e-12);
  // The first crossing when the curve comes back down (a finite run's noise).
  EXPECT_NEAR(*CrossingRate({1, 2, 3, 4}, {0, 2, 0, 4}, 1), 1.5, 1e-12);
}

TEST(ServingJudge, AFlatCurveAtTheThresholdLeavesTheCrossingIllConditioned) {
  // p99 0.4, 0.8, 0.84 s at 2, 4, 6/s against an SLO of 0.79 s: 2 + 0.39 / 0.4 x 2 = 3.95/s. The
  // same curve 5 % lower (0.38, 0.76, 0.798) crosses at 4 + 0.03 / 0.038 x 2 = 5.579/s, 5 % higher
  // (0.42, 0.84, 0.882) at 2 + 0.37 / 0.42 x 2 = 3.762/s: 5 % of p99 moves it by 41 % and 5 %.
  EXPECT_NEAR(*CrossingRate({2, 4, 6}, {0.4, 0.8, 0.84}, 0.79), 3.95, 1e-12);
  EXPECT_NEAR(*CrossingRate({2, 4, 6}, {0.38, 0.76, 0.798}, 0.79), 4 + 0.03 / 0.038 * 2, 1e-9);
  EXPECT_NEAR(*CrossingRate({2, 4, 6}, {0.42, 0.84, 0.882}, 0.79), 2 + 0.37 / 0.42 * 2, 1e-9);
}

TEST(ServingJudge, QueueingFormCrossingFollowsTheCurveNotTheChord) {
  // 0.1 + 1 / (10 - rate) at 2, 6 and 8/s: 0.225, 0.35, 0.6. It reaches 1.1 at 10 - 1 / 1.0 = 9/s,
  // and 0.45 at 10 - 1 / 0.35 = 7.142857/s, where the chord from 6 to 8 says 6.8/s.
  const std::array<double, 3> rates{2, 6, 8};
  const std::array<double, 3> values{0.225, 0.35, 0.6};
  EXPECT_NEAR(*QueueingFormCrossing(rates, values, 1.1), 9, 1e-9);
  EXPECT_NEAR(*QueueingFormCrossing(rates, values, 0.45), 10 - 1 / 0.35, 1e-9);
  EXPECT_NEAR(*CrossingRate({2, 6, 8}, {0.225, 0.35, 0.6}, 0.45), 6.8, 1e-9);
  // At a point it passes through: that rate.
  EXPECT_NEAR(*QueueingFormCrossing(rates, values, 0.35), 6, 1e-9);
}

TEST(ServingJudge, QueueingFormCrossingNeedsRisingConvexPoints) {
  // Slopes 0.05 then 0.025 a rate unit (concave), 0.05 and 0.05 (straight).
  EXPECT_FALSE(QueueingFormCrossing({2, 6, 8}, {0.2, 0.4, 0.45}, 0.42).has_value());
  EXPECT_FALSE(QueueingFormCrossing({2, 6, 8}, {0.2, 0.4, 0.5}, 0.45).has_value());
  EXPECT_FALSE(QueueingFormCrossing({2, 6, 8}, {0.2, 0.5, 0.4}, 0.45).has_value());    // falls
  EXPECT_FALSE(QueueingFormCrossing({2, 6, 8}, {0.225, 0.35, 0.6}, 0.1).has_value());  // below
  EXPECT_THROW(QueueingFormCrossing({2, 2, 8}, {0.225, 0.35, 0.6}, 1), base::Error);
}

TEST(ServingOverhead, PairsEachRoundsServerWithItsOwnRun) {
  // The rounds ran at 200, 235 and 263 tokens/s (the machine drifting); the server reached 99, 92
  // and 96 % of each. Paired: the median of 0.99, 0.92, 0.96 = 0.96. The ratio of the medians,
  // 216 / 235 = 0.919, pairs round 2's server with round 2's run only by luck of the order.
  ServingOverhead overhead;
  overhead.server_tokens_per_s = {198, 216.2, 252.48};
  overhead.run_tokens_per_s = {200, 235, 263};
  EXPECT_NEAR(overhead.ratio(), 0.96, 1e-12);
  EXPECT_NEAR(overhead.ratio_of_medians(), 216.2 / 235, 1e-12);
  // Rounds in another order of speed: pairs still follow their round.
  overhead.server_tokens_per_s = {252.48, 198, 216.2};
  overhead.run_tokens_per_s = {263, 200, 235};
  EXPECT_NEAR(overhead.ratio(), 0.96, 1e-12);
  EXPECT_EQ(ServingOverhead{}.ratio(), 0);
}

TEST(ServingJudge, CrossingOutsideTheRatesIsNotInterpolated) {
  EXPECT_FALSE(CrossingRate({3, 7, 11}, {0.2, 0.5, 0.9}, 1.0).has_value());  // above the highest
  EXPECT_FALSE(CrossingRate({3, 7, 11}, {1.2, 1.5, 2.0}, 1.0).has_value());  // below the lowest
  EXPECT_THROW(CrossingRate({3, 3, 11}, {0.2, 0.5, 2.0}, 1.0), base::Error);
  EXPECT_THROW(CrossingRate({3, 7}, {0.2, 0.5, 2.0}, 1.0), base::Error);
}

TEST(ServingJudge, RelativeErrorAndSpread) {
  EXPECT_NEAR(ServingRelativeError(11, 10, "x"), 0.1, 1e-12);
  EXPECT_NEAR(ServingRelativeError(8, 10, "x"), 0.2, 1e-12);
  EXPECT_THROW(ServingRelativeError(1, 0, "ttft at 1/s"), base::Error);
  EXPECT_THROW(ServingRelativeError(NAN, 1, "x"), base::Error);
  // (12 - 9) / median 10 = 0.3.
  EXPECT_NEAR(RelativeSpread({10, 12, 9}), 0.3, 1e-12);
}

TEST(ServingJudge, SaturationIsTheOverloadedSummarysThroughput) {
  serving::ServingSummary summary;
  summary.requests_per_s = 4.5;
  summary.throughput_tokens_per_s = 120;
  const Saturation s = SaturationOf(summary);
  EXPECT_EQ(s.requests_per_s, 4.5);
  EXPECT_EQ(s.tokens_per_s, 120);
}

serving::RequestOutcome Tokens(int64_t id, std::vector<double> times) {
  serving::RequestOutcome outcome;
  outcome.id = id;
  outcome.token_times_s = std::move(times);
  return outcome;
}

TEST(ServingJudge, DecodeRateCountsOnlyTheSpanWhereAllDecode) {
  // Request 0's tokens at 0.0..1.0 by 0.1, request 1's at 0.2..1.4 by 0.1: all decode from 0.2
  // (request 1's first token) to 1.0 (request 0's last). Tokens in (0.2, 1.0]: request 0's
  // 0.3..1.0 (8), request 1's 0.3..1.0 (8): 16 tokens over 0.8 s = 20 tokens/s.
  std::vector<double> a, b;
  for (int i = 0; i <= 10; ++i) a.push_back(0.1 * i);
  for (int i = 2; i <= 14; ++i) b.push_back(0.1 * i);
  EXPECT_NEAR(AllDecodingTokensPerS({Tokens(0, a), Tokens(1, b)}), 20, 1e-9);
  // Request 1 starts after request 0 ended: never decoded together.
  EXPECT_THROW(AllDecodingTokensPerS({Tokens(0, {0.1, 0.2}), Tokens(1, {0.5, 0.6})}), base::Error);
}

TEST(ServingJudge, TargetsPassOnTheirSide) {
  EXPECT_TRUE((ServingTarget{"median", 0.08, 0.10, false, ""}.pass()));
  EXPECT_FALSE((ServingTarget{"median", 0.12, 0.10, false, ""}.pass()));
  EXPECT_TRUE((ServingTarget{"overhead", 0.97, 0.95, true, ""}.pass()));
  EXPECT_FALSE((ServingTarget{"overhead", 0.90, 0.95, true, ""}.pass()));
  const ServingTarget missing{"crossing", std::nullopt, 0.10, false, "no crossing"};
  EXPECT_FALSE(missing.pass());
  EXPECT_TRUE(missing.ToJson()["value"].is_null());
  EXPECT_EQ(missing.ToJson()["why_missing"], "no crossing");
}

}  // namespace
}  // namespace moelab::validate
