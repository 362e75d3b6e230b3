// The GPU half of the profiler (device/cuda_profile.h): skips, saying why, without a GPU. With one:
// copies are timed, the cuBLAS expert FFN agrees with the CPU kernel, and a profile has GPU
// samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "device/cuda_profile.h"
#include "device/gpu_devices.h"
#include "kernels/expert_ffn.h"
#include "executor/executor_config.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "fit/profile_cost_source.h"
#include "profiler/profiler.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

TEST(GpuProfile, WithoutAGpuASessionRefusesWithAReason) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (!inventory.devices.empty())
    GTEST_SKIP() << "this machine has a GPU (" << inventory.devices[0].name << ")";
  try {
    device::GpuProfileSession session(0, 4096);
    FAIL() << "a session without a GPU must throw";
  } catch (const device::GpuError& e) {
    EXPECT_FALSE(std::string(e.what()).empty());
  }
}

TEST(GpuProfile, CopiesAreTimed) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (inventory.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inventory.why_none;
  device::GpuProfileSession session(inventory.devices[0].index, 1 << 20);
  for (bool pinned : {true, false}) {
    EXPECT_GT(session.CopyHostToDevice(1 << 20, pinned), 0.0);
    EXPECT_GT(session.CopyDeviceToHost(4096, pinned), 0.0);
  }
  EXPECT_THROW(session.CopyHostToDevice(2 << 20, true), device::GpuError);
  EXPECT_GT(inventory.devices[0].l2_bytes, 0);  // the GPU benches cycle weights against it
}

TEST(GpuProfile, CublasExpertFfnMatchesTheCpuKernel) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (inventory.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inventory.why_none;
  const int64_t tokens = 5, hidden = 64, width = 96;
  std::vector<kernels::Bf16> gate_up(static_cast<size_t>(2 * width * hidden)),
      down(static_cast<size_t>(hidden * width));
  for (size_t i = 0; i < gate_up.size(); ++i)
    gate_up[i] = kernels::FloatToBf16(0.05f * std::sin(0.37f * static_cast<float>(i)));
  for (size_t i = 0; i < down.size(); ++i)
    down[i] = kernels::FloatToBf16(0.05f * std::cos(0.23f * static_cast<float>(i)));
  std::vector<float> x(static_cast<size_t>(tokens * hidden));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.11f * static_cast<float>(i));
  std::vector<kernels::Bf16> block(gate_up);
  block.insert(block.end(), down.begin(), down.end());
  std::vector<float> cpu(x.size());
  kernels::ThreadPool pool(1);
  kernels::ExpertFfnScratch scratch;
  kernels::ExpertFfn(x.data(), tokens, hidden, width, block.data(), block.data() + gate_up.size(),
                     cpu.data(), pool, scratch);
  const std::vector<float> gpu = device::GpuExpertFfnForCheck(inventory.devices[0].index, tokens,
                                                              hidden, width, x, gate_up, down);
  ASSERT_EQ(gpu.size(), cpu.size());
  float scale = 0;
  for (float v : cpu) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < cpu.size(); ++i) {
    // bf16 intermediates on the GPU (fp32 on the CPU): a few bf16 ulps of the output's scale.
    EXPECT_NEAR(gpu[i], cpu[i], 0.03f * scale) << i;
  }
}

TEST(GpuProfile, EveryOperatorOfAPassIsMeasuredThroughTheBackendAndFitsACostSource) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (inventory.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inventory.why_none;
  ProfileRequest request;
  request.shape = model::ShapeOverrides{};
  request.shape.layers = 2;
  request.shape.hidden = 256;
  request.shape.intermediate = 512;
  request.shape.heads = 4;
  request.shape.kv_heads = 2;
  request.shape.head_dim = 64;
  request.cpu_operators = false;  // validate --device gpu's profile
  GridSpec grid;
  grid.expert_tokens = {1, 64, 128, 256};
  grid.matmul_tokens = {1, 8, 64, 128, 256};
  grid.decode_contexts = {64, 256};
  grid.decode_batches = {1, 2, 4};  // a curve needs 3 distinct x
  grid.prefill_tokens = {16, 64, 128};
  grid.verify_queries = {2, 3};
  grid.verify_contexts = {64, 256};
  grid.verify_batches = {1, 2, 4};
  grid.draft_contexts = {64, 256};
  grid.draft_batches = {1, 2, 4};
  grid.transfer_fixed_bytes = {1 << 20};
  grid.repetitions = 2;
  grid.min_time_s = 0.005;
  request.grid = grid;
  const nlohmann::json profile = RunProfile(request, model::PresetStore(testing::PresetDir()));
  ASSERT_NO_THROW(ValidateProfile(profile));
  EXPECT_TRUE(profile["machine"]["gpu"].is_object());
  std::map<std::string, int> samples;
  for (const auto& s : profile["samples"]) {
    EXPECT_EQ(s["device"], "cuda:0") << s.dump();  // no CPU operator was asked for
    EXPECT_GT(s["median_s"].get<double>(), 0.0) << s.dump();
    ++samples[s["operator"].get<std::string>()];
  }
  const std::map<std::string, int> expected = {{"expert_ffn", 5},
                                               {"attention_decode", 6},
                                               {"attention_prefill", 3},
                                               {"attention_verify", 12},
                                               {"router", 5},
                                               {"lm_head", 5},
                                               {"dense_ffn", 5},
                                               {"draft_decode", 6},
                                               {"norms_residual", 5},
                                               {"memcpy_h2d_pinned", 1},
                                               {"memcpy_h2d_pageable", 1},
                                               {"memcpy_d2h_pinned", 1},
                                               {"memcpy_d2h_pageable", 1}};
  EXPECT_EQ(samples, expected) << "notes: " << profile["notes"].dump(1);

  // The fit prices GPU passes from these curves (what validate --device gpu predicts with).
  const fit::Profile parsed = fit::ProfileFromJson(profile, "gpu profile");
  const fit::LatencyFit fitted = fit::FitLatency(parsed, fit::FitOptions{});
  ASSERT_TRUE(fit::FittedProfileCostSource::HasDevice(fitted, "cuda:0"));
  executor::ExecutorConfig config = executor::ExecutorConfigFromSpec(
      model::PresetStore(testing::PresetDir()).LoadModel("mixtral-8x7b"), request.shape);
  const model::MoeModelSpec spec = executor::SpecFromExecutorConfig(config);
  const fit::FittedProfileCostSource source(fitted, spec, "cuda:0");
  model::ForwardShape decode;
  decode.batch = 4;
  decode.tokens_per_sequence = 1;
  decode.context_length = 100;
  const model::ForwardCost cost = source.Forward(spec, decode);
  EXPECT_GT(cost.time_s, 0.0);
}

}  // namespace
}  // namespace moelab::profiler
