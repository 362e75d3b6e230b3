#include "model/forward_cost.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/parameter_count.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

class ForwardCostTest : public ::testing::Test {
 protected:
  PresetStore store_{testing::PresetDir()};
  CostParameters params_;
};

TEST_F(ForwardCostTest, SingleTokenDecodeIsBoundByActiveWeightBytes) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const HardwareSpec gpu = store_.LoadHardware("h100-sxm");
  const ForwardCost cost = EstimateForwardCost(model, gpu, {1, 1, 0, true}, params_);
  const double bandwidth =
      gpu.accelerator->memory_bandwidth_bytes_per_s * params_.memory_efficiency;
  const WeightBytes w = CountWeightBytes(model);
  // One token reads K experts per layer.
  EXPECT_NEAR(cost.activated_experts_per_layer, 2.0, 1e-12);
  const double expert_time = cost.OperatorTime("routed_experts");
  EXPECT_NEAR(expert_time, 32 * (params_.kernel_launch_s + 2 * w.expert / bandwidth),
              0.02 * expert_time);
  const double active_bytes = static_cast<double>(CountParameters(model).active) * 2.0;
  EXPECT_GT(cost.time_s, active_bytes / bandwidth * 0.95);
  EXPECT_LT(cost.time_s, active_bytes / bandwidth * 1.5);
}

TEST_F(ForwardCostTest, LongPrefillIsComputeBound) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const HardwareSpec gpu = store_.LoadHardware("h100-sxm");
  const ForwardCost cost = EstimateForwardCost(model, gpu, {1, 4096, 0, false}, params_);
  const double peak = gpu.accelerator->peak_flops.at("bf16") * params_.compute_efficiency;
  double expert_flops = 0;
  for (const OperatorCost& op : cost.operators) {
    if (op.name == "routed_experts") expert_flops = op.flops;
  }
  EXPECT_NEAR(cost.OperatorTime("routed_experts"),
              expert_flops / peak + 32 * params_.kernel_launch_s, 1e-9);
  EXPECT_NEAR(cost.activated_experts_per_layer, 8.0, 1e-6);
}

TEST_F(ForwardCostTest, TimeGrowsWithBatchTokensAndContext) {
  const MoeModelSpec model = store_.LoadModel("qwen2-57b-a14b");
  const HardwareSpec node = store_.LoadHardware("2xa100-80gb-sxm");
  double previous = 0;
  for (int64_t batch : {1, 2, 4, 8, 16, 64, 256}) {
    const double t = EstimateForwardCost(model, node, {batch, 1, 512, true}, params_).time_s;
    EXPECT_GT(t, previous) << batch;
    previous = t;
  }
  EXPECT_LT(EstimateForwardCost(model, node, {8, 1, 128, true}, params_).time_s,
            EstimateForwardCost(model, node, {8, 1, 8192, true}, params_).time_s);
  EXPECT_LT(EstimateForwardCost(model, node, {8, 1, 128, true}, params_).time_s,
            EstimateForwardCost(model, node, {8, 4, 128, true}, params_).time_s);
}

TEST_F(ForwardCostTest, TensorParallelSplitsWorkAndAddsCommunication) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const ForwardCost one =
      EstimateForwardCost(model, store_.LoadHardware("h100-sxm"), {4, 1, 256, true}, params_);
  const ForwardCost two =
      EstimateForwardCost(model, store_.LoadHardware("2xh100-sxm"), {4, 1, 256, true}, params_);
  EXPECT_EQ(one.OperatorTime("communication"), 0.0);
  EXPECT_GT(two.OperatorTime("communication"), 0.0);
  EXPECT_LT(two.time_s, one.time_s);
  EXPECT_GT(two.time_s, one.time_s / 2.0);
}

TEST_F(ForwardCostTest, DenseModelHasNoExpertsAndHostsCompute) {
  const MoeModelSpec dense = store_.LoadModel("llama-3.2-1b");
  const ForwardCost cost =
      EstimateForwardCost(dense, store_.LoadHardware("epyc-7763"), {1, 1, 0, true}, params_);
  EXPECT_EQ(cost.OperatorTime("routed_experts"), 0.0);
  EXPECT_GT(cost.OperatorTime("dense_ffn"), 0.0);
  EXPECT_EQ(cost.device, "AMD EPYC 7763");
  EXPECT_EQ(cost.compute_dtype, "fp32");  // Zen 3 has no bf16: falls back and says so
}

TEST_F(ForwardCostTest, SlidingWindowCapsAttentionWork) {
  MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const HardwareSpec gpu = store_.LoadHardware("h100-sxm");
  const double full =
      EstimateForwardCost(model, gpu, {8, 1, 32000, true}, params_).OperatorTime("attention_core");
  model.attention.sliding_window = 4096;
  const double windowed =
      EstimateForwardCost(model, gpu, {8, 1, 32000, true}, params_).OperatorTime("attention_core");
  EXPECT_LT(windowed, full * 0.2);
}

TEST_F(ForwardCostTest, RefusesBadShapesAndNonComputingHardware) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const HardwareSpec gpu = store_.LoadHardware("h100-sxm");
  EXPECT_THROW(EstimateForwardCost(model, gpu, {0, 1, 0, true}, params_), base::Error);
  EXPECT_THROW(EstimateForwardCost(model, gpu, {-3, 1, 0, true}, params_), base::Error);
  EXPECT_THROW(EstimateForwardCost(model, gpu, {1, 0, 0, true}, params_), base::Error);
  EXPECT_THROW(EstimateForwardCost(model, gpu, {1, 1, -1, true}, params_), base::Error);
  EXPECT_THROW(
      EstimateForwardCost(model, store_.LoadHardware("pcie4-x16"), {1, 1, 0, true}, params_),
      base::Error);
  CostParameters bad = params_;
  bad.compute_efficiency = 1.5;
  EXPECT_THROW(EstimateForwardCost(model, gpu, {1, 1, 0, true}, bad), base::Error);
}

// A beam step's ranked rows add one pass over their logits each (beam_selection), nothing else;
// a pass without them prices none, and more rows than the pass's tokens are refused.
TEST_F(ForwardCostTest, BeamSelectionIsPricedPerRankedRow) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  const HardwareSpec gpu = store_.LoadHardware("h100-sxm");
  ForwardShape shape{4, 1, 100, true};
  const ForwardCost plain = EstimateForwardCost(model, gpu, shape, params_);
  EXPECT_EQ(plain.OperatorTime("beam_selection"), 0.0);
  shape.ranked_rows = 4;
  const ForwardCost four = EstimateForwardCost(model, gpu, shape, params_);
  shape.ranked_rows = 2;
  const ForwardCost two = EstimateForwardCost(model, gpu, shape, params_);
  const double ranking = four.OperatorTime("beam_selection");
  EXPECT_GT(ranking, two.OperatorTime("beam_selection"));
  EXPECT_NEAR(four.time_s, plain.time_s + ranking, 1e-12 * four.time_s);
  EXPECT_EQ(ScopeOf(Operator::kBeamSelection), OperatorScope::kOncePerPass);
  shape.ranked_rows = 5;
  EXPECT_THROW(EstimateForwardCost(model, gpu, shape, params_), base::Error);
}

TEST_F(ForwardCostTest, MemoryFootprintSaysWhetherWeightsFit) {
  const MoeModelSpec model = store_.LoadModel("mixtral-8x7b");
  EXPECT_FALSE(EstimateMemory(model, store_.LoadHardware("rtx-4090"), 0, params_).fits());
  EXPECT_FALSE(
      EstimateMemory(model, store_.LoadHardware("h100-sxm"), 0, params_).fits());  // 93 GB > 80 GiB
  EXPECT_TRUE(EstimateMemory(model, store_.LoadHardware("h200"), 0, params_).fits());
  const MemoryFootprint two =
      EstimateMemory(model, store_.LoadHardware("2xh100-sxm"), 1e5, params_);
  EXPECT_NEAR(two.kv_bytes_per_device, 1e5 * KvCacheBytesPerToken(model) / 2.0, 1.0);
}

}  // namespace
}  // namespace moelab::model
