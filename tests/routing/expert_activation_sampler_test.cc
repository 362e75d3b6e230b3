// Routing-aware N: distinct experts per pass from recorded or synthetic routing.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/expert_activation.h"
#include "model/forward_cost.h"
#include "model/moe_math.h"
#include "routing/expert_activation_sampler.h"
#include "routing/routing_source.h"

namespace moelab::routing {
namespace {

// A trace of `sequences` decode streams of `steps` tokens from `source`, one step per position.
RoutingTrace DecodeTrace(RoutingSource& source, int64_t layers, int64_t experts, int64_t top_k,
                         int64_t sequences, int64_t steps) {
  RoutingTrace trace;
  trace.num_layers = layers;
  trace.num_experts = experts;
  trace.top_k = top_k;
  trace.source = "test";
  for (int64_t s = 0; s < steps; ++s) {
    RoutingStep step;
    step.kind = "decode";
    step.tokens = sequences;
    step.sequence_tokens.assign(static_cast<size_t>(sequences), 1);
    step.experts.resize(static_cast<size_t>(layers));
    for (int64_t l = 0; l < layers; ++l) source.Route(s, l, sequences, step.experts[l]);
    trace.steps.push_back(std::move(step));
  }
  return trace;
}

// An empty trace of `layers` layers, 8 experts, top-2.
RoutingTrace EmptyTrace(int64_t layers, const char* source) {
  RoutingTrace trace;
  trace.num_layers = layers;
  trace.num_experts = 8;
  trace.top_k = 2;
  trace.source = source;
  return trace;
}

TEST(ExpertActivation, UniformIsTheClosedForm) {
  const model::UniformExpertActivation uniform(8, 2);
  for (int64_t batch : {1, 3, 16}) {
    for (int64_t positions : {1, 5}) {
      EXPECT_DOUBLE_EQ(
          uniform.DistinctExperts(batch, positions, model::PassKind::kVerify),
          model::ExpectedActivatedExperts(static_cast<double>(batch * positions), 8, 2));
    }
  }
  const auto from_spec = MakeExpertActivation(ParseRoutingSpec("uniform"), 4, 8, 2, 1);
  EXPECT_EQ(from_spec->Describe(), "uniform");
  EXPECT_DOUBLE_EQ(from_spec->DistinctExperts(4, 3, model::PassKind::kVerify),
                   model::ExpectedActivatedExperts(12, 8, 2));
}

TEST(ExpertActivation, UniformTraceRecoversTheClosedFormWithinSamplingError) {
  const auto uniform = MakeUniformRouting(4, 8, 2, 7);
  const RoutingTrace trace = DecodeTrace(*uniform, 4, 8, 2, 8, 64);
  const auto sampled = SampledExpertActivation::FromTrace(trace, "uniform trace", 3);
  for (int64_t batch : {1, 2, 4, 8}) {
    for (int64_t positions : {1, 3, 5}) {
      const double closed =
          model::ExpectedActivatedExperts(static_cast<double>(batch * positions), 8, 2);
      // 256 draws x 4 layers of a count bounded by 8: the mean's standard error is below 0.1.
      EXPECT_NEAR(sampled->DistinctExperts(batch, positions, model::PassKind::kDecode), closed,
                  0.25)
          << "batch " << batch << " positions " << positions;
    }
  }
}

// The tokens-per-expert spread: sums to the distinct experts and to the pass's tokens x K.
void ExpectConsistentLoad(const model::ExpertLoad& load, double distinct, double routed_tokens,
                          double tolerance) {
  double experts = 0, tokens = 0;
  for (size_t i = 0; i < load.experts.size(); ++i) {
    experts += load.experts[i];
    tokens += load.experts[i] * static_cast<double>(load.first_tokens + static_cast<int64_t>(i));
  }
  EXPECT_NEAR(experts, distinct, tolerance);
  EXPECT_NEAR(tokens, routed_tokens, tolerance * routed_tokens);
}

TEST(ExpertActivation, UniformLoadIsBinomial) {
  const model::UniformExpertActivation uniform(8, 2);
  const model::ExpertLoad small =
      uniform.Load(2, 1, model::PassKind::kDecode);  // 2 tokens: 8 (2 (1/4)(3/4), 1/16)
  ASSERT_EQ(small.first_tokens, 1);
  ASSERT_EQ(small.experts.size(), 2u);
  EXPECT_NEAR(small.experts[0], 8 * 2 * 0.25 * 0.75, 1e-12);
  EXPECT_NEAR(small.experts[1], 8 * 0.25 * 0.25, 1e-12);
  for (int64_t tokens : {1, 7, 60, 4096}) {
    ExpectConsistentLoad(uniform.Load(tokens, 1, model::PassKind::kPrefill),
                         model::ExpectedActivatedExperts(static_cast<double>(tokens), 8, 2),
                         2.0 * static_cast<double>(tokens), 1e-9);
  }
  EXPECT_GT(uniform.Load(4096, 1, model::PassKind::kPrefill).first_tokens,
            600);  // mean 1024, 12 sd = 333: tails left out
  const model::UniformExpertActivation dense(4, 4);
  const model::ExpertLoad all = dense.Load(3, 2, model::PassKind::kVerify);
  EXPECT_EQ(all.first_tokens, 6);
  EXPECT_EQ(all.experts, std::vector<double>{4.0});
}

TEST(ExpertActivation, SampledLoadMatchesItsDistinctExpertsAndTheBinomialOnUniformRouting) {
  const auto uniform = MakeUniformRouting(4, 8, 2, 7);
  const auto sampled =
      SampledExpertActivation::FromTrace(DecodeTrace(*uniform, 4, 8, 2, 8, 64), "uniform trace", 3);
  const model::UniformExpertActivation closed(8, 2);
  for (int64_t batch : {1, 4, 8}) {
    const model::ExpertLoad load = sampled->Load(batch, 3, model::PassKind::kDecode);
    ExpectConsistentLoad(load, sampled->DistinctExperts(batch, 3, model::PassKind::kDecode),
                         2.0 * 3 * batch, 1e-9);
    const model::ExpertLoad expected = closed.Load(batch, 3, model::PassKind::kDecode);
    for (size_t i = 0; i < expected.experts.size(); ++i) {
      const int64_t t = expected.first_tokens + static_cast<int64_t>(i);
      const size_t at = static_cast<size_t>(t - load.first_tokens);
      const double got =
          t >= load.first_tokens && at < load.experts.size() ? load.experts[at] : 0.0;
      EXPECT_NEAR(got, expected.experts[i], 0.3)
          << "batch " << batch << ", experts with " << t << " tokens";
    }
  }
}

TEST(ExpertActivation, RepeatedExpertsGiveFewerDistinctExpertsThanUniform) {
  // Every token of a sequence routes to the experts of its first token: drafts that route alike.
  RoutingTrace trace = EmptyTrace(2, "repeated");
  const auto uniform = MakeUniformRouting(2, 8, 2, 11);
  for (int64_t round = 0; round < 32; ++round) {
    RoutingStep step;
    step.kind = "verify";
    step.tokens = 2 * 5;
    step.sequence_tokens = {5, 5};
    step.experts.resize(2);
    for (int64_t l = 0; l < 2; ++l) {
      std::vector<std::vector<int32_t>> first;
      uniform->Route(round, l, 2, first);
      for (int64_t s = 0; s < 2; ++s) {
        for (int64_t t = 0; t < 5; ++t) step.experts[l].push_back(first[s]);
      }
    }
    trace.steps.push_back(std::move(step));
  }
  const auto sampled = SampledExpertActivation::FromTrace(trace, "repeated", 1);
  EXPECT_EQ(sampled->segments(model::PassKind::kVerify), 64);
  // One sequence of five tokens: exactly its first token's K experts.
  EXPECT_DOUBLE_EQ(sampled->DistinctExperts(1, 5, model::PassKind::kVerify), 2.0);
  EXPECT_LT(sampled->DistinctExperts(4, 5, model::PassKind::kVerify),
            model::ExpectedActivatedExperts(20, 8, 2) - 1.0);
  // The cost sources see it: fewer experts, fewer routed-expert bytes than uniform.
  model::MoeSpec moe;
  moe.num_experts = 8;
  moe.top_k = 2;
  model::ForwardShape shape{1, 5, 100, true, sampled.get()};
  EXPECT_DOUBLE_EQ(model::ActivatedExpertsPerLayer(moe, shape), 2.0);
  shape.activation = nullptr;
  EXPECT_NEAR(model::ActivatedExpertsPerLayer(moe, shape), model::ExpectedActivatedExperts(5, 8, 2),
              1e-12);
}

// A batch is B different sequences: three recorded verify segments that each keep to their own
// pair of experts activate all six when a pass draws all three (drawn with replacement, a segment
// would often come twice: 5.33 distinct on average), and a pass of more sequences than the pool
// holds still draws (with replacement).
TEST(ExpertActivation, APassDrawsDifferentSegmentsWhileThePoolHasEnough) {
  RoutingTrace trace = EmptyTrace(1, "test");
  RoutingStep step;
  step.kind = "verify";
  step.tokens = 6;
  step.sequence_tokens = {2, 2, 2};
  step.experts = {{{0, 1}, {1, 0}, {2, 3}, {3, 2}, {4, 5}, {5, 4}}};
  trace.steps.push_back(step);
  const auto sampled = SampledExpertActivation::FromTrace(trace, "three sequences", 5);
  EXPECT_DOUBLE_EQ(sampled->DistinctExperts(3, 2, model::PassKind::kVerify), 6.0);
  EXPECT_DOUBLE_EQ(sampled->DistinctExperts(1, 2, model::PassKind::kVerify), 2.0);
  // Four single tokens, with replacement: each expert unused with probability (2/3)^4 (exact).
  EXPECT_NEAR(sampled->DistinctExperts(4, 1, model::PassKind::kVerify),
              6.0 * (1.0 - std::pow(2.0 / 3.0, 4)), 1e-12);
}

TEST(ExpertActivation, LongerPassesThanAnySegmentJoinSegments) {
  const auto uniform = MakeUniformRouting(2, 16, 1, 5);
  RoutingTrace trace =
      DecodeTrace(*uniform, 2, 16, 1, 4, 1);  // four one-token segments... joined per step
  trace.steps[0].kind = "verify";
  trace.steps[0].sequence_tokens = {1, 1, 1, 1};
  const auto sampled = SampledExpertActivation::FromTrace(trace, "short", 1);
  const double three = sampled->DistinctExperts(1, 3, model::PassKind::kVerify);
  EXPECT_GE(three, 1.0);
  EXPECT_LE(three, 3.0);
}

TEST(ExpertActivation, RefusesAGateOfAnotherShape) {
  const auto uniform = MakeUniformRouting(2, 8, 2, 5);
  const auto sampled =
      SampledExpertActivation::FromTrace(DecodeTrace(*uniform, 2, 8, 2, 2, 4), "eight", 1);
  model::MoeSpec moe;
  moe.num_experts = 16;
  moe.top_k = 2;
  EXPECT_THROW(
      model::ActivatedExpertsPerLayer(moe, model::ForwardShape{1, 1, 0, true, sampled.get()}),
      base::Error);
  EXPECT_THROW(MakeExpertActivation(ParseRoutingSpec("gate"), 2, 8, 2, 1), base::Error);
}

TEST(ExpertActivation, SameSeedSameEstimate) {
  const auto source = MakeUniformRouting(3, 8, 2, 9);
  const RoutingTrace trace = DecodeTrace(*source, 3, 8, 2, 4, 16);
  const auto a = SampledExpertActivation::FromTrace(trace, "a", 42);
  const auto b = SampledExpertActivation::FromTrace(trace, "b", 42);
  EXPECT_DOUBLE_EQ(a->DistinctExperts(3, 2, model::PassKind::kDecode),
                   b->DistinctExperts(3, 2, model::PassKind::kDecode));
}

TEST(RoutingTrace, SequenceTokensRoundTripAndAreChecked) {
  const auto source = MakeUniformRouting(1, 4, 1, 3);
  RoutingTrace trace = DecodeTrace(*source, 1, 4, 1, 2, 2);
  EXPECT_EQ(RoutingTraceFromJson(RoutingTraceToJson(trace), "t"), trace);
  EXPECT_EQ(RoutingTraceFromJson(nlohmann::json::parse(RoutingTraceToText(trace)), "t"), trace);
  trace.steps[0].sequence_tokens = {1, 2};
  EXPECT_THROW(trace.Validate("t"), base::Error);
}

}  // namespace
}  // namespace moelab::routing
