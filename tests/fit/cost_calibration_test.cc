// The "preset calibrated by a profile" cost source: planted roofline parameters are recovered
// from a synthetic profile, the roofline comes from a preset or the profile's measured limits,
// and profiles that cannot calibrate are refused with the file and the reason.
#include "fit/cost_calibration.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "model/preset_store.h"
#include "tests/fit/synthetic.h"
#include "tests/support/synthetic_profile.h"
#include "tests/support/test_paths.h"
#include "tests/support/error_of.h"

namespace moelab::fit {
namespace {

using testing::PlantedRoofline;
using testing::SyntheticProfile;

nlohmann::json NoisyProfile(const PlantedRoofline& truth, double relative_noise, uint64_t seed) {
  testing::Noise noise(seed);
  return SyntheticProfile(truth, [&] { return noise.Multiplicative(1, relative_noise); });
}

TEST(CostCalibration, RecoversPlantedParametersExactlyWithoutNoise) {
  const PlantedRoofline truth;
  const Profile profile = ProfileFromJson(SyntheticProfile(truth), "synthetic.json");
  const CostCalibration c = CalibrateCosts(profile, RooflineFromLimits(profile, "bf16"),
                                           model::CostParameters{}, FitOptions{});
  EXPECT_NEAR(c.params.compute_efficiency, truth.compute_efficiency, 1e-4);
  EXPECT_NEAR(c.params.memory_efficiency, truth.memory_efficiency, 1e-4);
  EXPECT_NEAR(c.params.kernel_launch_s, truth.kernel_launch_s, 1e-8);
  EXPECT_EQ(c.points, 33);  // the attention sample is left out
  EXPECT_LT(c.mape_calibrated, 1e-3);
  EXPECT_GT(c.mape_assumed, 1.0);  // the defaults (0.7, 0.8, 4 us) are not the planted values
  ASSERT_EQ(c.operators.size(), 3u);
  EXPECT_EQ(c.operators[0].op, "expert_ffn");
  EXPECT_EQ(c.roofline.source, "limits measured in synthetic.json (2 threads)");
}

TEST(CostCalibration, RecoversPlantedParametersUnderNoiseWithinTheirStandardErrors) {
  const PlantedRoofline truth;
  const Profile profile = ProfileFromJson(NoisyProfile(truth, 0.05, 7), "noisy.json");
  const CostCalibration c = CalibrateCosts(profile, RooflineFromLimits(profile, "bf16"),
                                           model::CostParameters{}, FitOptions{});
  EXPECT_NEAR(c.params.compute_efficiency, truth.compute_efficiency, 0.05);
  EXPECT_NEAR(c.params.memory_efficiency, truth.memory_efficiency, 0.05);
  ASSERT_TRUE(c.std_errors[0] && c.std_errors[1]);
  EXPECT_LT(std::abs(c.params.compute_efficiency - truth.compute_efficiency), 4 * *c.std_errors[0]);
  EXPECT_LT(std::abs(c.params.memory_efficiency - truth.memory_efficiency), 4 * *c.std_errors[1]);
  EXPECT_LT(c.mape_calibrated, 8.0);
}

TEST(CostCalibration, ThePresetRooflineScalesTheHostPeakToTheProfiledThreads) {
  const model::PresetStore store(testing::PresetDir());
  const model::HardwareSpec epyc = store.LoadHardware("epyc-9654");
  const RooflineDevice cpu = RooflineFromHardware(epyc, "cpu", "bf16", 2);
  EXPECT_DOUBLE_EQ(cpu.peak_flops, epyc.host->peak_flops.at("bf16") * 2.0 / 96.0);
  EXPECT_DOUBLE_EQ(cpu.bandwidth_bytes_per_s, epyc.host->dram_bandwidth_bytes_per_s);
  const model::HardwareSpec gpu = store.LoadHardware("a100-80gb-sxm");
  EXPECT_DOUBLE_EQ(RooflineFromHardware(gpu, "gpu", "bf16", 2).peak_flops,
                   gpu.accelerator->peak_flops.at("bf16"));
  EXPECT_THROW(RooflineFromHardware(epyc, "gpu", "bf16", 2),
               base::Error);  // a host preset has no GPU
}

TEST(CostCalibration, TheProfiledMachineIsAHostWithItsMeasuredLimits) {
  const Profile profile = ProfileFromJson(SyntheticProfile(PlantedRoofline{}), "synthetic.json");
  const model::HardwareSpec machine = HardwareFromProfile(profile);
  EXPECT_EQ(machine.name, "profile:synthetic.json");
  EXPECT_FALSE(machine.has_accelerator());
  EXPECT_EQ(machine.host->cores, 2);
  EXPECT_DOUBLE_EQ(machine.host->peak_flops.at("bf16"), PlantedRoofline{}.peak_flops);
  EXPECT_DOUBLE_EQ(machine.host->dram_bandwidth_bytes_per_s,
                   PlantedRoofline{}.bandwidth_bytes_per_s);
  EXPECT_DOUBLE_EQ(machine.host->dram_bytes, 24e9);
}

// The error calibrating the profile `json` (read as "bad.json") against its limits gives.
std::string CalibrationErrorOf(const nlohmann::json& json, const std::string& dtype = "bf16") {
  return testing::ErrorOf([&] {
    const Profile profile = ProfileFromJson(json, "bad.json");
    CalibrateCosts(profile, RooflineFromLimits(profile, dtype), model::CostParameters{},
                   FitOptions{});
  });
}

TEST(CostCalibration, RefusesProfilesThatCannotCalibrate) {
  nlohmann::json no_limits = SyntheticProfile(PlantedRoofline{});
  no_limits["machine"].erase("limits");
  EXPECT_NE(CalibrationErrorOf(no_limits).find("bad.json: no field 'machine.limits'"),
            std::string::npos)
      << CalibrationErrorOf(no_limits);

  EXPECT_NE(
      CalibrationErrorOf(SyntheticProfile(PlantedRoofline{}), "fp8").find("has no 'fp8' peak"),
      std::string::npos);

  nlohmann::json no_flops = SyntheticProfile(PlantedRoofline{});
  no_flops["samples"][4].erase("flops");
  EXPECT_NE(CalibrationErrorOf(no_flops).find("samples[4] has no 'flops' or 'bytes'"),
            std::string::npos)
      << CalibrationErrorOf(no_flops);

  nlohmann::json few = SyntheticProfile(PlantedRoofline{});
  few["samples"] = nlohmann::json::array({few["samples"][0], few["samples"][1], few["samples"][2]});
  EXPECT_NE(CalibrationErrorOf(few).find(
                "3 samples of expert_ffn, router, lm_head or dense_ffn on device 'cpu'"),
            std::string::npos)
      << CalibrationErrorOf(few);

  nlohmann::json negative = SyntheticProfile(PlantedRoofline{});
  negative["samples"][0]["bytes"] = -1;
  EXPECT_NE(CalibrationErrorOf(negative).find("samples[0]"), std::string::npos)
      << CalibrationErrorOf(negative);
}

}  // namespace
}  // namespace moelab::fit
