// The GPU profile's forward-pass benches (profiler/impl/gpu_pass_bench.cc) planned and run on the
// CPU engine: every family's harness is a valid model whose pass times the family's operator, so
// what the GPU runs is checked here too, where no GPU is.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "executor/transformer.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "profiler/impl/benches.h"
#include "tests/executor/tiny_models.h"

namespace moelab::profiler::impl {
namespace {

TEST(ForwardPassBench, EveryGpuFamilysHarnessRunsAPassThatTimesItsOperator) {
  // The Qwen-MoE shape: shared experts and a dense first layer, which the harnesses leave out.
  const executor::ExecutorConfig target = testing::TinyQwenMoe(64);
  const executor::ExecutorConfig draft = testing::TinyLlama(64);
  kernels::ThreadPool pool(1);
  const GridSpec spec;
  BenchEnvironment env;
  env.target = &target;
  env.draft = &draft;
  env.pool = &pool;
  env.spec = &spec;
  const std::string gpu = "cuda:0";
  using F = OperatorFamily;
  const std::vector<std::vector<GridPoint>> families = {
      {{F::kExpertFfn, gpu, 1}, {F::kExpertFfn, gpu, 64}, {F::kExpertFfn, gpu, 130}},
      {{F::kRouter, gpu, 1}, {F::kRouter, gpu, 70}},
      {{F::kLmHead, gpu, 1}, {F::kLmHead, gpu, 70}},
      {{F::kNormsResidual, gpu, 3}},
      {{F::kAttentionDecode, gpu, 1, 16}, {F::kAttentionDecode, gpu, 3, 40}},
      {{F::kAttentionVerify, gpu, 2, 16, 0, 3}},
      {{F::kAttentionPrefill, gpu, 8}, {F::kAttentionPrefill, gpu, 20}},
      {{F::kDenseFfn, gpu, 1}, {F::kDenseFfn, gpu, 70}},
      {{F::kDraftDecode, gpu, 2, 16}}};
  for (const std::vector<GridPoint>& points : families) {
    const F family = points.front().family;
    SCOPED_TRACE(ToString(family));
    const PassHarness harness = PlanPassHarness(points, env, /*l2_bytes=*/1 << 20, 8e9);
    if (family == F::kExpertFfn) {
      // Only the K experts every token is forced to, at least the target's layers.
      EXPECT_TRUE(harness.force_first_experts);
      EXPECT_EQ(harness.config.num_experts, target.top_k);
      EXPECT_EQ(harness.config.expert_intermediate_size, target.expert_intermediate_size);
      EXPECT_GE(harness.layers, target.num_layers);
      EXPECT_EQ(harness.config.num_shared_experts, 0);
      EXPECT_EQ(harness.config.first_dense_layers, 0);
    } else if (family == F::kRouter || family == F::kLmHead || family == F::kNormsResidual) {
      // The target's routing over narrow experts, at the target's layer count.
      EXPECT_FALSE(harness.force_first_experts);
      EXPECT_EQ(harness.config.num_experts, target.num_experts);
      EXPECT_EQ(harness.config.expert_intermediate_size, 64);
      EXPECT_EQ(harness.layers, target.num_layers);
    } else if (family == F::kDenseFfn || family == F::kDraftDecode) {
      EXPECT_EQ(harness.config.hidden_size, draft.hidden_size);
    } else {
      EXPECT_FALSE(harness.config.is_moe());  // attention's harness: a dense model
      EXPECT_EQ(harness.cached, family != F::kAttentionPrefill);
    }
    EXPECT_EQ(harness.layers, harness.config.num_layers);
    const executor::ModelWeights weights = executor::MakeSyntheticWeights(harness.config, 1, pool);
    ForwardPassBench bench(family, harness, std::make_unique<executor::Transformer>(weights, pool));
    // A sample is per layer (expert_ffn: per layer and forced expert); the LM head and the
    // draft's whole pass are once per pass.
    const double layers = static_cast<double>(harness.layers);
    const double expected_scale =
        family == F::kExpertFfn ? 1.0 / (layers * static_cast<double>(target.top_k))
        : family == F::kLmHead || family == F::kDraftDecode ? 1.0
                                                            : 1.0 / layers;
    EXPECT_DOUBLE_EQ(bench.time_scale(), expected_scale);
    for (const GridPoint& p : points) {
      EXPECT_GT(bench.Pass(p), 0.0) << p.Label();
      EXPECT_GT(bench.Pass(p), 0.0) << p.Label() << " (again: caches cut back and reused)";
    }
  }
}

}  // namespace
}  // namespace moelab::profiler::impl
