#include "sim/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "base/error.h"
#include "model/parameter_count.h"
#include "tests/sim/sim_test_util.h"

namespace moelab::sim {
namespace {

using policies::Device;
using testing::Presets;

// The roofline of one expert, written out (docs/model.md section 6).
double ExpertRoofline(const model::MoeModelSpec& model, double peak_flops, double bandwidth,
                      double tokens, const model::CostParameters& p) {
  const double params = static_cast<double>(model::CountParameters(model).params_per_expert);
  const double bytes =
      static_cast<double>(model::ExpertBytes(model)) +
      tokens * static_cast<double>(model.hidden_size) * 2.0 * p.activation_bits / 8.0;
  return p.kernel_launch_s + std::max(2.0 * tokens * params / (peak_flops * p.compute_efficiency),
                                      bytes / (bandwidth * p.memory_efficiency));
}

// Mixtral-8x7B's experts on an RTX 3090 and its 16-core host, each device priced by its own
// parameters.
void ExpectExpertRooflineOnEachDevice(const model::CostParameters& accelerator_params,
                                      const model::CostParameters& host_params) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  const model::HardwareSpec hardware = Presets().LoadHardware("rtx-3090");
  CostModel cost = testing::RooflineCostModel(model, hardware, accelerator_params, host_params, 16);
  for (int64_t tokens : {1, 64, 1000}) {
    const double gpu = ExpertRoofline(model, hardware.accelerator->peak_flops.at("bf16"),
                                      hardware.accelerator->memory_bandwidth_bytes_per_s, tokens,
                                      accelerator_params);
    EXPECT_NEAR(cost.ExpertSeconds(Device::kAccelerator, tokens), gpu, 1e-12 * gpu) << tokens;
    const double cpu =
        ExpertRoofline(model, hardware.host->peak_flops.at("bf16"),
                       hardware.host->dram_bandwidth_bytes_per_s, tokens, host_params);
    EXPECT_NEAR(cost.ExpertSeconds(Device::kCpu, tokens), cpu, 1e-12 * cpu) << tokens;
  }
}

TEST(CostModel, ExpertTimesAreTheRooflineOnEachDevice) {
  ExpectExpertRooflineOnEachDevice(model::CostParameters{}, model::CostParameters{});
}

TEST(CostModel, HostParametersPriceOnlyTheCpu) {
  model::CostParameters host_params;  // what a calibration by a CPU profile changes
  host_params.memory_efficiency = 0.4;
  host_params.compute_efficiency = 0.3;
  host_params.kernel_launch_s = 2e-5;
  ExpectExpertRooflineOnEachDevice(model::CostParameters{}, host_params);
}

TEST(CostModel, FewerCpuThreadsSlowOnlyTheComputeBoundRegime) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  const model::HardwareSpec hardware = Presets().LoadHardware("rtx-3090");  // host: 16 cores
  CostModel all = testing::RooflineCostModel(model, hardware, {}, {}, 16);
  CostModel half = testing::RooflineCostModel(model, hardware, {}, {}, 8);
  EXPECT_DOUBLE_EQ(all.ExpertSeconds(Device::kCpu, 1),
                   half.ExpertSeconds(Device::kCpu, 1));  // memory-bound
  const double launch = model::CostParameters{}.kernel_launch_s;
  EXPECT_NEAR(half.ExpertSeconds(Device::kCpu, 4096) - launch,
              2 * (all.ExpertSeconds(Device::kCpu, 4096) - launch), 1e-9);
}

TEST(CostModel, DensePartsAddUpToTheForwardCostWithoutRoutedExperts) {
  const model::MoeModelSpec model =
      Presets().LoadModel("deepseek-v2-lite");  // a leading dense layer, MLA
  model::HardwareSpec hardware = Presets().LoadHardware("a100-80gb-sxm");
  CostModel cost = testing::RooflineCostModel(model, hardware, {}, {}, 8);
  model::ForwardShape shape;
  shape.batch = 4;
  shape.context_length = 300;
  const CostModel::DenseCost& dense = cost.Dense(Device::kAccelerator, shape);
  double sum = dense.embedding_s + dense.lm_head_s;
  for (double layer_s : dense.layer_s) sum += layer_s;
  const model::ForwardCost forward = model::EstimateForwardCost(model, hardware, shape, {});
  EXPECT_NEAR(sum, forward.time_s - forward.OperatorTime("routed_experts"), 1e-12);
  EXPECT_GT(dense.layer_s[0], dense.layer_s[1]);  // the dense FFN layer is heavier
}

// A beam step's ranking over the vocabulary runs after its LM head: the LM head's op carries it,
// and a pass of the same shape without ranked rows (the cached shape before) does not.
TEST(CostModel, ABeamStepsRankingRidesOnItsLmHead) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  const model::HardwareSpec hardware = Presets().LoadHardware("rtx-3090");
  CostModel cost = testing::RooflineCostModel(model, hardware, {}, {}, 16);
  model::ForwardShape shape{4, 1, 100, true};
  const double lm_head = cost.Dense(Device::kAccelerator, shape).lm_head_s;
  shape.ranked_rows = 4;
  const double beam = cost.Dense(Device::kAccelerator, shape).lm_head_s;
  const model::ForwardCost forward = model::EstimateForwardCost(model, hardware, shape, {});
  EXPECT_GT(forward.OperatorTime(model::Operator::kBeamSelection), 0.0);
  EXPECT_NEAR(beam, lm_head + forward.OperatorTime(model::Operator::kBeamSelection), 1e-15);
  shape.ranked_rows = 0;
  EXPECT_EQ(cost.Dense(Device::kAccelerator, shape).lm_head_s, lm_head);
}

TEST(CostModel, TheWorkingSetReachesTheSourceOfItsDeviceAndFreshTimes) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  const model::HardwareSpec hardware = Presets().LoadHardware("rtx-3090");
  CostModel cost(model, hardware, 16, std::make_shared<testing::WorkingSetProbe>(),
                 std::make_shared<testing::WorkingSetProbe>());
  const model::ForwardShape decode{1, 1, 100, true};
  EXPECT_EQ(cost.ExpertSeconds(Device::kAccelerator, 3), 3.0);  // 0: the source's default
  EXPECT_EQ(cost.Dense(Device::kAccelerator, decode).layer_s[0], 1.0 / 32);
  cost.SetWorkingSet(Device::kAccelerator, 5.0);
  EXPECT_EQ(cost.working_set_bytes(Device::kAccelerator), 5.0);
  EXPECT_EQ(cost.ExpertSeconds(Device::kAccelerator, 3), 8.0);  // not the time cached before
  EXPECT_EQ(cost.Dense(Device::kAccelerator, decode).layer_s[0], 6.0 / 32);
  EXPECT_EQ(cost.ExpertSeconds(Device::kCpu, 3), 3.0);  // the other device keeps its own
  EXPECT_THROW(cost.SetWorkingSet(Device::kCpu, -1), base::Error);
}

TEST(CostModel, TransfersAreBandwidthPlusLatency) {
  const model::HardwareSpec hardware = Presets().LoadHardware("rtx-3090");
  CostModel cost =
      testing::RooflineCostModel(Presets().LoadModel("mixtral-8x7b"), hardware, {}, {}, 16);
  const model::LinkSpec& link = *hardware.host_link;
  EXPECT_DOUBLE_EQ(cost.HostToDeviceSeconds(1e9),
                   1e9 / link.host_to_device_bandwidth_bytes_per_s + link.latency_s);
  EXPECT_DOUBLE_EQ(cost.DeviceToHostSeconds(1e6),
                   1e6 / link.device_to_host_bandwidth_bytes_per_s + link.latency_s);
  EXPECT_DOUBLE_EQ(cost.StorageReadSeconds(7e9),
                   7e9 / hardware.host->storage_read_bandwidth_bytes_per_s);
}

TEST(CostModel, FiddlerLatencyModelIsExactAtOneToken) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  CostModel cost =
      testing::RooflineCostModel(model, Presets().LoadHardware("rtx-3090"), {}, {}, 16);
  const model::FiddlerLatencyModel latency = cost.FiddlerLatency(model::ExpertBytes(model));
  EXPECT_NEAR(latency.CpuLatency(1), cost.ExpertSeconds(Device::kCpu, 1), 1e-15);
  EXPECT_NEAR(latency.CpuLatency(128), cost.ExpertSeconds(Device::kCpu, 128), 1e-12);
  EXPECT_DOUBLE_EQ(latency.gpu_s, cost.ExpertSeconds(Device::kAccelerator, 1));
  EXPECT_DOUBLE_EQ(latency.transfer_s,
                   cost.HostToDeviceSeconds(static_cast<double>(model::ExpertBytes(model))));
  // Mixtral on an RTX 3090 host: copying (14 ms) beats the CPU only for large token counts.
  EXPECT_GT(model::FiddlerCrossoverTokens(latency), 64);
}

TEST(CostModel, RefusesHardwareItCannotSimulate) {
  const model::MoeModelSpec model = Presets().LoadModel("mixtral-8x7b");
  auto message = [&](const std::string& hardware) {
    try {
      testing::RooflineCostModel(model, Presets().LoadHardware(hardware), {}, {}, 4);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      message("2xrtx-3090")
          .find(
              "models one accelerator and its host (pick the accelerator preset, e.g. 'rtx-3090')"),
      std::string::npos);
  EXPECT_NE(message("ryzen-9-7950x").find("has no accelerator"), std::string::npos);
  EXPECT_NE(message("pcie4-x16").find("has no accelerator"), std::string::npos);
  EXPECT_THROW(testing::RooflineCostModel(Presets().LoadModel("llama-3.2-1b"),
                                          Presets().LoadHardware("rtx-3090"), {}, {}, 4),
               base::Error);
}

}  // namespace
}  // namespace moelab::sim
