// The validation arithmetic on fixed inputs, every expected value worked out by hand.
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "profiler/profile_grid.h"
#include "validate/validation_case.h"
#include "validate/round_limits.h"
#include "validate/run_validation.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {
namespace {

nlohmann::json RoundLimits(double dram_gb_per_s, double bf16_gflops) {
  return {{"dram_read_bytes_per_s", dram_gb_per_s * 1e9},
          {"peak_flops", {{"bf16", bf16_gflops * 1e9}, {"fp32", 100e9}}},
          {"threads", 2}};
}

// A round whose probe read under 3/4 of the rounds' median is named, with the limit, its value
// and its share; rounds within it are not, and fewer than three rounds have no median to judge by.
TEST(SlowRoundNotes, NameTheRoundsWhoseProbeReadFarBelowTheOthers) {
  // validate-quick-avx512bf16-2026-12-08-beam-caches-before-clock-second's probes.
  const std::vector<nlohmann::json> rounds = {RoundLimits(19.9, 804), RoundLimits(25.3, 810),
                                              RoundLimits(31.8, 409)};
  const std::vector<std::string> notes = SlowRoundNotes(rounds);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("round 3's bf16 peak probe read 409 GFLOP/s, 0.51 of the rounds' "
                          "median (804 GFLOP/s)"),
            std::string::npos)
      << notes[0];
  // 19.9 GB/s is 0.79 of 25.3: not named at 3/4, named at 0.8.
  const std::vector<std::string> stricter = SlowRoundNotes(rounds, 0.8);
  ASSERT_EQ(stricter.size(), 2u);
  EXPECT_NE(stricter[0].find("round 1's DRAM read bandwidth probe read 19.9 GB/s"),
            std::string::npos)
      << stricter[0];
  EXPECT_TRUE(SlowRoundNotes({rounds[0], rounds[2]}).empty());
  // A limit not probed in every round is not judged.
  std::vector<nlohmann::json> partial = rounds;
  partial[0].erase("peak_flops");
  EXPECT_TRUE(SlowRoundNotes(partial).empty());
}

CaseResult Sd(int64_t batch, int64_t gamma, double predicted, double measured,
              const std::string& routing = "trace:t") {
  CaseResult r;
  r.spec.kind = CaseKind::kSd;
  r.spec.batch = batch;
  r.spec.gamma = gamma;
  r.cost_source = "fitted-profile";
  r.routing = routing;
  r.predicted = predicted;
  r.measured = measured;
  r.abs_error = AbsError(predicted, measured);
  return r;
}

CaseResult Decode(double predicted, double measured) {
  CaseResult r;
  r.spec.kind = CaseKind::kDecode;
  r.cost_source = "fitted-profile";
  r.routing = "trace:t";
  r.predicted = predicted;
  r.measured = measured;
  r.abs_error = AbsError(predicted, measured);
  return r;
}

TEST(ValidationMetrics, QuantileInterpolatesBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(Quantile({3, 1, 2}, 0.5), 2.0);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3, 4}, 0.5), 2.5);
  // p90 of 1..10: position 0.9 x 9 = 8.1 -> 9 + 0.1 x (10 - 9).
  EXPECT_DOUBLE_EQ(Quantile({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, 0.9), 9.1);
  EXPECT_DOUBLE_EQ(Quantile({5}, 0.9), 5.0);
  EXPECT_THROW(Quantile({}, 0.5), base::Error);
  EXPECT_THROW(Quantile({1}, 1.5), base::Error);
}

TEST(ValidationMetrics, AbsErrorIsRelativeToTheMeasurement) {
  EXPECT_DOUBLE_EQ(AbsError(1.1, 1.0), 0.10000000000000009);
  EXPECT_DOUBLE_EQ(AbsError(0.5, 1.0), 0.5);
  EXPECT_THROW(AbsError(1.0, 0.0), base::Error);
  EXPECT_THROW(AbsError(NAN, 1.0), base::Error);
}

TEST(ValidationMetrics, SummariesPerKindAndRouting) {
  const std::vector<CaseResult> results = {
      Decode(1.10, 1.00),              // 10 %
      Decode(0.95, 1.00),              // 5 %
      Sd(1, 1, 1.20, 1.00),            // 20 %
      Sd(1, 2, 1.50, 2.00),            // 25 %
      Sd(1, 1, 1.00, 1.00, "uniform")  // 0 %, another group
  };
  const std::vector<ErrorSummary> summaries = Summarize(results);
  ASSERT_EQ(summaries.size(), 5u);  // measured: overall, decode, sd; uniform: overall, sd
  EXPECT_EQ(summaries[0].kind, "overall");
  EXPECT_EQ(summaries[0].routing_assumed, "measured");
  EXPECT_EQ(summaries[0].cases, 4);
  // errors 0.05, 0.10, 0.20, 0.25: median 0.15, p90 at 2.7 -> 0.20 + 0.7 x 0.05 = 0.235, max 0.25
  EXPECT_NEAR(summaries[0].median_abs_error, 0.15, 1e-12);
  EXPECT_NEAR(summaries[0].p90_abs_error, 0.235, 1e-12);
  EXPECT_NEAR(summaries[0].max_abs_error, 0.25, 1e-12);
  EXPECT_EQ(summaries[1].kind, "decode");
  EXPECT_NEAR(summaries[1].median_abs_error, 0.075, 1e-12);
  EXPECT_EQ(summaries[2].kind, "sd");
  EXPECT_NEAR(summaries[2].median_abs_error, 0.225, 1e-12);
  EXPECT_EQ(summaries[3].routing_assumed, "uniform");
  EXPECT_EQ(summaries[3].cases, 1);
  EXPECT_DOUBLE_EQ(summaries[3].max_abs_error, 0.0);
}

TEST(ValidationMetrics, SummariesSetTheRunsOwnSpreadBesideTheError) {
  const auto ranged = [](CaseResult r, double min, double max) {
    r.measured_min = min;
    r.measured_max = max;
    return r;
  };
  const std::vector<CaseResult> results = {
      ranged(Decode(1.10, 1.00), 0.90, 1.20),  // spread 30 %, prediction inside
      ranged(Decode(0.80, 1.00), 0.95, 1.05),  // spread 10 %, prediction below the min
      ranged(Decode(1.05, 1.00), 1.00, 1.05),  // spread 5 %, at the max: inside
  };
  const std::vector<ErrorSummary> summaries = Summarize(results);
  ASSERT_EQ(summaries.size(), 2u);  // overall, decode
  for (const ErrorSummary& s : summaries) {
    EXPECT_NEAR(s.median_measured_spread, 0.10, 1e-12) << s.kind;
    EXPECT_EQ(s.predictions_within_spread, 2) << s.kind;
  }
}

TEST(ValidationMetrics, BestGammaRegret) {
  // Batch 2: predicted best gamma 3 (1.9), measured best gamma 2 (1.8); at gamma 3 the executor
  // measured 1.5, so regret = 1 - 1.5 / 1.8.
  const std::vector<CaseResult> results = {Sd(2, 1, 1.2, 1.3), Sd(2, 2, 1.6, 1.8),
                                           Sd(2, 3, 1.9, 1.5), Sd(4, 1, 1.1, 1.2),
                                           Sd(4, 2, 1.0, 1.1)};
  const std::vector<BestGammaRow> best = BestGamma(results);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].batch, 2);
  EXPECT_EQ(best[0].predicted_gamma, 3);
  EXPECT_EQ(best[0].measured_gamma, 2);
  EXPECT_NEAR(best[0].regret, 1.0 - 1.5 / 1.8, 1e-12);
  EXPECT_EQ(best[1].batch, 4);
  EXPECT_EQ(best[1].predicted_gamma, 1);
  EXPECT_EQ(best[1].measured_gamma, 1);
  EXPECT_DOUBLE_EQ(best[1].regret, 0.0);
}

TEST(ValidationPlan, HeldOutCasesAreNotProfileGridPoints) {
  const ValidationPlan plan = DefaultPlan(true, {}, 8);
  EXPECT_EQ(plan.held_out_layers, 5);
  int held_out = 0;
  for (const ValidationCase& c : plan.cases) {
    held_out += c.held_out_shape;
    if (c.kind == CaseKind::kDecode) {
      // GridSpec::Quick profiles decode attention at contexts 16/128/1024/2048/4096 and its
      // batches.
      for (int64_t grid : profiler::GridSpec::Quick().decode_contexts)
        EXPECT_NE(c.MeanDecodeContext(), grid);
      for (int64_t grid : profiler::GridSpec::Quick().decode_batches) EXPECT_NE(c.batch, grid);
    }
    if (c.kind == CaseKind::kPrefill) {
      for (int64_t grid : {64, 256, 1024}) EXPECT_NE(c.prompt, grid);
    }
  }
  EXPECT_GT(held_out, 0);
  EXPECT_EQ(DefaultPlan(true, {CaseKind::kBeam}, 8).cases.size(), 3u);
  EXPECT_THROW(CaseKindFromString("offlode"), base::Error);
}

// The plain decode an SD speedup divides by is the same work at every gamma of a batch, and only
// there: another batch, the held-out shape or another kind is another reference.
TEST(ValidationPlan, SdCasesShareTheirBaselineAcrossGammasOfOneBatch) {
  const ValidationPlan plan = DefaultPlan(true, {CaseKind::kSd}, 8);
  for (const ValidationCase& a : plan.cases) {
    int sharing = 0;
    for (const ValidationCase& b : plan.cases) {
      const bool same = SameSdBaseline(a, b);
      EXPECT_EQ(same, a.batch == b.batch && a.held_out_shape == b.held_out_shape)
          << a.Label() << " / " << b.Label();
      sharing += same;
    }
    EXPECT_EQ(sharing, a.held_out_shape ? 1 : 4) << a.Label();  // quick: gammas 1..4
  }
  ValidationCase sd{CaseKind::kSd, false, 2, 24, 200, 17, 3, 0, {}, 0};
  ValidationCase other_context = sd, decode = sd;
  other_context.context = 300;
  decode.kind = CaseKind::kDecode;
  EXPECT_FALSE(SameSdBaseline(sd, other_context));
  EXPECT_FALSE(SameSdBaseline(sd, decode));
  EXPECT_FALSE(SameSdBaseline(decode, decode));
}

// A prefill is one step, with no other steps for a median to leave a burst out of: it runs three
// times a round, in memory and offloaded; every other kind once.
TEST(ValidationPlan, PrefillsRunThreeTimesARound) {
  EXPECT_EQ(RunsPerRound(CaseKind::kPrefill), 3);
  EXPECT_EQ(RunsPerRound(CaseKind::kOffloadPrefill), 3);
  for (CaseKind kind : {CaseKind::kDecode, CaseKind::kSd, CaseKind::kBeam, CaseKind::kOffload})
    EXPECT_EQ(RunsPerRound(kind), 1) << ToString(kind);
}

// The case rounds spread over the profile's rounds and centred in them; all run by the last.
TEST(ValidationPlan, CaseRoundsSpreadOverTheProfilesRounds) {
  const auto by = [](int rounds, int cases) {
    std::vector<int> done;
    for (int r = 1; r <= rounds; ++r) done.push_back(CaseRoundsBy(r, rounds, cases));
    return done;
  };
  EXPECT_EQ(by(3, 3), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(by(5, 3), (std::vector<int>{1, 1, 2, 2, 3}));  // after profile rounds 1, 3 and 5
  EXPECT_EQ(by(5, 1), (std::vector<int>{0, 0, 1, 1, 1}));  // the middle one
  EXPECT_EQ(by(3, 5), (std::vector<int>{2, 3, 5}));
  EXPECT_EQ(by(1, 4), (std::vector<int>{4}));
  EXPECT_EQ(CaseRoundsBy(0, 5, 3), 0);
  EXPECT_EQ(CaseRoundsBy(2, 5, 0), 0);
  EXPECT_THROW(CaseRoundsBy(6, 5, 3), base::Error);
}

// Three runs of three steps, each hit by a burst in a different step: every step's median is the
// quiet time, so the sum is 3 where the median of the totals (7, 6, 5) is 6.
TEST(ValidationMetrics, PairedSignTestIsTheExactBinomialTail) {
  // Six pairs, all one way: 2 x (1/2)^6.
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2}), 2.0 / 64);
  EXPECT_DOUBLE_EQ(PairedSignTestP({2, 2, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1}), 2.0 / 64);
  // Five of six: 2 x (C(6,0) + C(6,1)) / 64.
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 1, 1, 1, 1, 3}, {2, 2, 2, 2, 2, 2}), 14.0 / 64);
  // Ties are dropped: four pairs that differ, all one way.
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 1, 1, 1, 5, 5}, {2, 2, 2, 2, 5, 5}), 2.0 / 16);
  // Three rounds can never resolve a pair at 5 %; an even split is 1.
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 1, 1}, {2, 2, 2}), 0.25);
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 3}, {2, 2}), 1.0);
  // Only the pairs both have; none at all is no evidence.
  EXPECT_DOUBLE_EQ(PairedSignTestP({1, 1, 1, 1, 1, 1, 9}, {2, 2, 2, 2, 2, 2}), 2.0 / 64);
  EXPECT_DOUBLE_EQ(PairedSignTestP({}, {1, 2}), 1.0);
}

TEST(ValidationMetrics, SumOfStepMediansLeavesOutBurstsInSingleSteps) {
  const std::optional<double> sum = SumOfStepMedians({{1, 1, 5}, {1, 4, 1}, {3, 1, 1}});
  ASSERT_TRUE(sum.has_value());
  EXPECT_DOUBLE_EQ(*sum, 3.0);
  EXPECT_DOUBLE_EQ(*SumOfStepMedians({{2, 4}, {4, 6}}), 3.0 + 5.0);  // even count: the midpoint
  EXPECT_FALSE(SumOfStepMedians({{1, 1}, {1, 1, 1}}).has_value());   // different steps
  EXPECT_FALSE(SumOfStepMedians({}).has_value());
  EXPECT_EQ(*StepMedians({{1, 1, 5}, {1, 4, 1}, {3, 1, 1}}), (std::vector<double>{1, 1, 1}));
  EXPECT_FALSE(StepMedians({{1, 1}, {1, 1, 1}}).has_value());
  EXPECT_FALSE(SumOfStepMedians({{}, {}}).has_value());
}

// Three rounds of one SD case, each after its own plain decode of 4 steps of 10 ms (the pooled
// reference's medians). Rounds 2 and 3 ran in a slow stretch 1.4x long, their plain decodes and
// their SD steps alike, and round 1 had a burst in one SD step: pooled alone, each SD step's
// median over the rounds is a slow one and the speedup reads 40 / 28 = 1.43 where every round
// against its own plain decode says 2; brought to the reference's speed, the step medians are
// the calm ones and the burst stays left out.
TEST(ValidationMetrics, SdStepsAreTakenAtTheirOwnReferencesSpeed) {
  const std::vector<double> pooled = {10, 10, 10, 10};
  const std::vector<std::vector<double>> references = {
      {10, 10, 11, 10}, {14, 14, 14, 15}, {14, 13, 14, 14}};
  const std::vector<std::vector<double>> sd = {{5, 30, 5, 5}, {7, 7, 7, 7}, {7, 7, 7, 7}};
  EXPECT_DOUBLE_EQ(40.0 / *SumOfStepMedians(sd), 40.0 / 28.0);
  const std::optional<std::vector<std::vector<double>>> scaled =
      AtReferenceSpeed(sd, references, pooled);
  ASSERT_TRUE(scaled.has_value());
  EXPECT_DOUBLE_EQ((*scaled)[0][1], 30.0);  // round 1's reference ran at the pooled speed
  EXPECT_DOUBLE_EQ((*scaled)[1][0], 5.0);   // 7 / 1.4
  EXPECT_DOUBLE_EQ(40.0 / *SumOfStepMedians(*scaled), 2.0);
  // Shapes that do not line up, or a reference with no speed, leave the steps as they are.
  EXPECT_FALSE(AtReferenceSpeed(sd, {{10, 10, 10}, {10, 10, 10}, {10, 10, 10}}, pooled));
  EXPECT_FALSE(AtReferenceSpeed(sd, references, {}));
  EXPECT_FALSE(AtReferenceSpeed(sd, {references[0]}, pooled));
  EXPECT_FALSE(AtReferenceSpeed(sd, references, {10, 0, 10, 10}));
}

}  // namespace
}  // namespace moelab::validate
