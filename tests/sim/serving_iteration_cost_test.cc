// The mixed-batch pricing (docs/serving-sim.md) checked against the CostSource it composes: a
// batch that is one uniform shape must cost exactly that shape's Forward, and a mixed batch what
// its parts say.
#include <gtest/gtest.h>

#include "model/cost_source.h"
#include "model/preset_store.h"
#include "sim/serving_iteration_cost.h"

namespace moelab::sim {
namespace {

struct Fixture {
  model::PresetStore store = model::PresetStore::Default();
  model::MoeModelSpec model = store.LoadModel("qwen2-57b-a14b");
  std::shared_ptr<const model::CostSource> source = model::RooflineCostSource::ForHardware(
      store.LoadHardware("2xa100-80gb-sxm"), model::CostParameters{});

  double ForwardSeconds(int64_t batch, int64_t tokens, int64_t context, bool all_logits) const {
    model::ForwardShape shape;
    shape.batch = batch;
    shape.tokens_per_sequence = tokens;
    shape.context_length = context;
    shape.logits_for_all_positions = all_logits;
    return source->Forward(model, shape).time_s;
  }
};

scheduler::IterationPlan Decodes(int64_t count, int64_t context) {
  scheduler::IterationPlan plan;
  for (int64_t i = 0; i < count; ++i) plan.batch.push_back({i, false, 1, context, true});
  return plan;
}

TEST(ServingIterationCost, UniformDecodesCostTheirForward) {
  Fixture f;
  CostSourceIterationPricer pricer(f.source, f.model, 0);
  for (const int64_t batch : {1, 7, 64}) {
    for (const int64_t context : {100, 2000}) {
      EXPECT_NEAR(pricer.Seconds(Decodes(batch, context)),
                  f.ForwardSeconds(batch, 1, context, true),
                  1e-12 * f.ForwardSeconds(batch, 1, context, true))
          << batch << " x " << context;
    }
  }
}

TEST(ServingIterationCost, APrefillChunkCostsItsForward) {
  Fixture f;
  CostSourceIterationPricer pricer(f.source, f.model, 0);
  scheduler::IterationPlan plan;
  plan.batch.push_back({1, true, 512, 1024, true});
  const double expected = f.ForwardSeconds(1, 512, 1024, false);
  EXPECT_NEAR(pricer.Seconds(plan), expected, 1e-9 * expected);
}

TEST(ServingIterationCost, MixedBatchesShareTheWeightsAndAddOverhead) {
  Fixture f;
  CostSourceIterationPricer pricer(f.source, f.model, 0.002);
  scheduler::IterationPlan mixed = Decodes(32, 600);
  mixed.batch.push_back({100, true, 256, 0, false});
  const double together = pricer.Seconds(mixed);
  CostSourceIterationPricer apart(f.source, f.model, 0.002);
  scheduler::IterationPlan chunk;
  chunk.batch.push_back({100, true, 256, 0, false});
  const double separate = apart.Seconds(Decodes(32, 600)) + apart.Seconds(chunk);
  // One pass reads the weights once: cheaper than two passes, dearer than the decodes alone.
  EXPECT_LT(together, separate);
  EXPECT_GT(together, apart.Seconds(Decodes(32, 600)));
  const nlohmann::json breakdown = pricer.Breakdown();
  EXPECT_NEAR(breakdown["overhead_s"].get<double>(), 0.002, 1e-15);
  EXPECT_NEAR(breakdown["weight_streaming_s"].get<double>() + breakdown["lm_head_s"].get<double>() +
                  breakdown["attention_s"].get<double>() + 0.002,
              together, 1e-12);
}

}  // namespace
}  // namespace moelab::sim
