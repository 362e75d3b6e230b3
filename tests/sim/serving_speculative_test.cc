// Speculative decoding in the serving simulator: on a fixed-time server each decode emits the
// seeded coins' accepted drafts + 1 (alpha 0: one token per iteration, the D/D/1 timing; coins
// that accept every draft: gamma + 1); SpeculativeIterationPricer adds the draft's passes to the
// verify pass exactly as composed from the two pricers; --routing prices the distinct experts the
// routing gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "model/cost_source.h"
#include "model/preset_store.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_simulator.h"
#include "sim/serving_speculative_cost.h"

namespace moelab::sim {
namespace {

ServingSimOptions SdOptions(int64_t gamma, double alpha) {
  ServingSimOptions options;
  options.scheduler.kv_blocks = 1024;
  options.scheduler.max_running_sequences = 4;
  options.scheduler.max_batched_tokens = 4096;
  options.scheduler.decode_tokens_per_step = gamma + 1;
  options.acceptance = scheduler::SpeculativeAcceptance{alpha, 11};
  return options;
}

TEST(ServingSpeculativeSim, AlphaZeroEmitsOneTokenPerIteration) {
  // One request of 10 output tokens on a 1 s server: the prefill emits the first token at 1 s,
  // each decode (every draft rejected) one more: finish at 10 s, tokens at 1, 2, ..., 10 s.
  FixedIterationPricer pricer(1.0);
  const ServingSimResult result = SimulateServing({{0, 0.0, 20, 10}}, SdOptions(3, 0.0), pricer);
  const serving::RequestOutcome& outcome = result.outcomes[0];
  EXPECT_EQ(outcome.output_tokens, 10);
  EXPECT_NEAR(outcome.finish_s, 10.0, 1e-12);
  for (int64_t i = 0; i < 10; ++i) EXPECT_NEAR(outcome.token_times_s[i], i + 1.0, 1e-12);
  EXPECT_EQ(result.iterations, 10);
}

TEST(ServingSpeculativeSim, EmittedTokensFollowTheSeededCoins) {
  // gamma 3 at alpha 0.6: iteration k's decode emits Accepted(id, generated, min(3, left - 1)) + 1
  // tokens, all at the iteration's end; worked out here from the coins themselves.
  const int64_t gamma = 3, output = 40;
  const scheduler::SpeculativeAcceptance coins{0.6, 11};
  FixedIterationPricer pricer(1.0);
  const ServingSimResult result =
      SimulateServing({{7, 0.0, 20, output}}, SdOptions(gamma, 0.6), pricer);
  std::vector<double> expected_times{1.0};  // the prefill's token
  int64_t generated = 1;
  double now = 1.0;
  while (generated < output) {
    now += 1.0;
    const int64_t drafted = std::min(gamma, output - generated - 1);
    const int64_t emitted = coins.Accepted(7, generated, drafted) + 1;  // keyed by the id, 7
    expected_times.insert(expected_times.end(), emitted, now);
    generated += emitted;
  }
  const serving::RequestOutcome& outcome = result.outcomes[0];
  EXPECT_EQ(outcome.token_times_s, expected_times);
  EXPECT_NEAR(outcome.finish_s, now, 1e-12);
  EXPECT_LT(result.iterations, output);  // some drafts were accepted
}

TEST(ServingSpeculativeSim, PricerAddsTheDraftPassesToTheVerify) {
  model::PresetStore store = model::PresetStore::Default();
  const model::MoeModelSpec target = store.LoadModel("qwen2-57b-a14b");
  const model::MoeModelSpec draft = store.LoadModel("llama-3.2-1b");
  std::shared_ptr<const model::CostSource> source = model::RooflineCostSource::ForHardware(
      store.LoadHardware("2xa100-80gb-sxm"), model::CostParameters{});
  // 3 decodes of gamma 3 (4 positions) at context 500, one of 2 positions near its end, and a
  // prefill chunk of 128 tokens.
  scheduler::IterationPlan plan;
  for (int64_t i = 0; i < 3; ++i) plan.batch.push_back({i, false, 4, 500, true});
  plan.batch.push_back({3, false, 2, 500, true});
  plan.batch.push_back({4, true, 128, 0, false});
  SpeculativeIterationPricer pricer(std::make_unique<CostSourceIterationPricer>(source, target, 0),
                                    std::make_unique<CostSourceIterationPricer>(source, draft, 0));
  // By hand: the verify is the plan itself; the draft runs step 0 over the 4 drafting decodes (1
  // token each) and the chunk, then steps 1 and 2 over the 3 decodes with 3 drafts.
  CostSourceIterationPricer verify(source, target, 0), drafts(source, draft, 0);
  scheduler::IterationPlan step0;
  for (int64_t i = 0; i < 4; ++i) step0.batch.push_back({i, false, 1, 500, true});
  step0.batch.push_back({4, true, 128, 0, false});
  double expected = verify.Seconds(plan) + drafts.Seconds(step0);
  for (int64_t k = 1; k <= 2; ++k) {
    scheduler::IterationPlan step;
    for (int64_t i = 0; i < 3; ++i) step.batch.push_back({i, false, 1, 500 + k, true});
    expected += drafts.Seconds(step);
  }
  EXPECT_NEAR(pricer.Seconds(plan), expected, 1e-12 * expected);
  EXPECT_GT(pricer.Breakdown()["draft_s"].get<double>(), 0);
  EXPECT_NEAR(pricer.Breakdown()["draft_s"].get<double>() + verify.Seconds(plan), expected,
              1e-12 * expected);
}

// An activation that reports a fixed number of distinct experts: the routed experts' cost must
// follow it, not uniform N(T).
class FixedActivation : public model::ExpertActivation {
 public:
  FixedActivation(int64_t experts, int64_t top_k, double distinct)
      : experts_(experts), top_k_(top_k), distinct_(distinct) {}
  std::string Describe() const override { return "fixed"; }
  int64_t num_experts() const override { return experts_; }
  int64_t top_k() const override { return top_k_; }
  double DistinctExperts(int64_t, int64_t, model::PassKind) const override { return distinct_; }
  model::ExpertLoad Load(int64_t batch, int64_t tokens, model::PassKind kind) const override {
    return model::UniformExpertActivation(experts_, top_k_).Load(batch, tokens, kind);
  }

 private:
  int64_t experts_, top_k_;
  double distinct_;
};

TEST(ServingSpeculativeSim, RoutingPricesTheDistinctExpertsItGives) {
  model::PresetStore store = model::PresetStore::Default();
  const model::MoeModelSpec target = store.LoadModel("qwen2-57b-a14b");
  std::shared_ptr<const model::CostSource> source = model::RooflineCostSource::ForHardware(
      store.LoadHardware("2xa100-80gb-sxm"), model::CostParameters{});
  scheduler::IterationPlan plan;
  for (int64_t i = 0; i < 16; ++i) plan.batch.push_back({i, false, 1, 300, true});
  const int64_t experts = target.moe->num_experts, top_k = target.moe->top_k;
  CostSourceIterationPricer uniform(source, target, 0);
  // Every token on the same K experts: fewer weights to read than uniform's N(16).
  FixedActivation shared(experts, top_k, static_cast<double>(top_k));
  CostSourceIterationPricer routed(source, target, 0);
  routed.RouteBy(&shared);
  EXPECT_LT(routed.Seconds(plan), uniform.Seconds(plan));
  // An activation equal to uniform's closed form prices exactly as uniform.
  const model::UniformExpertActivation closed_form(experts, top_k);
  CostSourceIterationPricer same(source, target, 0);
  same.RouteBy(&closed_form);
  EXPECT_NEAR(same.Seconds(plan), uniform.Seconds(plan), 1e-12 * uniform.Seconds(plan));
}

}  // namespace
}  // namespace moelab::sim
