// The GPU half of the profiler (device/cuda_profile.h): skips, saying why, without a GPU. With one:
// copies are timed, the cuBLAS expert FFN agrees with the CPU kernel, and a profile has GPU
// samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "device/cuda_profile.h"
#include "device/gpu_devices.h"
#include "kernels/expert_ffn.h"
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
  EXPECT_GT(session.l2_bytes(), 0);
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

TEST(GpuProfile, ProfileHasGpuSamples) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (inventory.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inventory.why_none;
  ProfileRequest request;
  request.shape = executor::ShapeOverrides{};
  request.shape.layers = 2;
  request.shape.hidden = 256;
  request.shape.intermediate = 512;
  request.shape.heads = 4;
  request.shape.kv_heads = 2;
  request.shape.head_dim = 64;
  GridSpec grid;
  grid.expert_tokens = {1, 64};
  grid.transfer_fixed_bytes = {1 << 20};
  grid.repetitions = 2;
  grid.min_time_s = 0.005;
  request.grid = grid;
  const nlohmann::json profile = RunProfile(request, model::PresetStore(testing::PresetDir()));
  ASSERT_NO_THROW(ValidateProfile(profile));
  EXPECT_TRUE(profile["machine"]["gpu"].is_object());
  std::set<std::string> gpu_operators;
  for (const auto& s : profile["samples"]) {
    if (s["device"] != "cpu") gpu_operators.insert(s["operator"].get<std::string>());
  }
  for (const char* op : {"expert_ffn", "memcpy_h2d_pinned", "memcpy_h2d_pageable",
                         "memcpy_d2h_pinned", "memcpy_d2h_pageable"}) {
    EXPECT_EQ(gpu_operators.count(op), 1u) << op << "; notes: " << profile["notes"].dump(1);
  }
}

}  // namespace
}  // namespace moelab::profiler
