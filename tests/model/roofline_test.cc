#include "model/roofline.h"

#include <gtest/gtest.h>

#include "model/cost_source.h"
#include "model/forward_cost.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

TEST(Roofline, IsLaunchesPlusTheSlowerOfComputeAndMemory) {
  CostParameters p;
  p.compute_efficiency = 0.5;
  p.memory_efficiency = 0.8;
  p.kernel_launch_s = 1e-6;
  RooflineTarget target;
  target.peak_flops = 1e12;
  target.bandwidth_bytes_per_s = 1e11;
  target.devices = 2;
  // Memory-bound: 8e8 bytes over 2 devices at 0.8 x 1e11.
  EXPECT_DOUBLE_EQ(RooflineSeconds(target, p, 1e6, 8e8, 3), 3e-6 + 4e8 / 0.8e11);
  // Compute-bound: 4e12 FLOPs over 2 devices at 0.5 x 1e12.
  EXPECT_DOUBLE_EQ(RooflineSeconds(target, p, 4e12, 8e8, 1), 1e-6 + 2e12 / 0.5e12);
}

TEST(Roofline, HostPeakScalesWithThreadsUpToAllCores) {
  const PresetStore store(testing::PresetDir());
  const HardwareSpec hardware = store.LoadHardware("rtx-3090");
  const double all = HostTargetOf(hardware, hardware.host->cores, "bf16").peak_flops;
  EXPECT_DOUBLE_EQ(HostTargetOf(hardware, 1, "bf16").peak_flops,
                   all / static_cast<double>(hardware.host->cores));
  EXPECT_DOUBLE_EQ(HostTargetOf(hardware, 10 * hardware.host->cores, "bf16").peak_flops, all);
  EXPECT_DOUBLE_EQ(HostTargetOf(hardware, 1, "bf16").bandwidth_bytes_per_s,
                   hardware.host->dram_bandwidth_bytes_per_s);
}

// One routed expert priced directly equals the routed_experts operator of a model whose MoE layers
// hold that single expert (what the simulator used to build to price one).
TEST(Roofline, OneExpertIsTheRoutedExpertsOperatorOfAOneExpertModel) {
  const PresetStore store(testing::PresetDir());
  const MoeModelSpec model = store.LoadModel("mixtral-8x7b");
  const HardwareSpec hardware = store.LoadHardware("rtx-3090");
  MoeModelSpec one_expert = model;
  one_expert.moe->num_experts = 1;
  one_expert.moe->top_k = 1;
  const auto source = RooflineCostSource::ForHardware(hardware, CostParameters{});
  for (int64_t tokens : {1, 32, 4096}) {
    const ForwardCost cost =
        EstimateForwardCost(one_expert, hardware, {tokens, 1, 0, true}, CostParameters{});
    const double per_layer =
        cost.OperatorTime(Operator::kRoutedExperts) / static_cast<double>(model.num_moe_layers());
    EXPECT_NEAR(source->ExpertSeconds(model, tokens, 0), per_layer, 1e-12 * per_layer) << tokens;
  }
}

}  // namespace
}  // namespace moelab::model
