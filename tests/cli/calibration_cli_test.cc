// The calibrated-roofline cost source through the CLI: a profile's fitted efficiencies drive plan
// sd / sim sd / plan hardware / sim offload exactly as the same values given by hand would, the
// profiled machine becomes a plan hardware candidate, and misuse is refused.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/synthetic_profile.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;

class CalibrationCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::MakeTempDir("cli-calibrate");
    profile_ = (dir_ / "profile.json").string();
    std::ofstream(profile_) << testing::SyntheticProfile(truth_).dump();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  nlohmann::json Json(const std::string& args) {
    const CliRun r = RunMoelab(args);
    EXPECT_EQ(r.status, 0) << args << "\n" << r.err;
    return r.status == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  }

  testing::PlantedRoofline truth_;
  std::filesystem::path dir_;
  std::string profile_;
};

TEST_F(CalibrationCliTest, PlanSdUsesTheFittedEfficienciesAsIfGivenByHand) {
  const std::string plan =
      "plan sd --model mixtral-8x7b --draft llama-3.2-1b --hardware epyc-9654 --batch 1,16 --gamma "
      "2 --json";
  const nlohmann::json calibrated = Json(plan + " --calibrate " + profile_);
  ASSERT_FALSE(calibrated.is_null());
  EXPECT_EQ(calibrated["cost_source"], "calibrated-roofline");
  const nlohmann::json& fitted = calibrated["cost_calibration"]["parameters"];
  EXPECT_NEAR(fitted["compute_efficiency"]["value"].get<double>(), truth_.compute_efficiency, 1e-4);
  EXPECT_NEAR(fitted["memory_efficiency"]["value"].get<double>(), truth_.memory_efficiency, 1e-4);
  EXPECT_EQ(calibrated["cost_calibration"]["device"], "cpu");

  char by_hand[256];
  std::snprintf(by_hand, sizeof(by_hand),
                " --compute-efficiency %.17g --memory-efficiency %.17g --kernel-launch-s %.17g",
                fitted["compute_efficiency"]["value"].get<double>(),
                fitted["memory_efficiency"]["value"].get<double>(),
                fitted["kernel_launch_s"]["value"].get<double>());
  const nlohmann::json manual = Json(plan + by_hand);
  ASSERT_EQ(manual["rows"].size(), calibrated["rows"].size());
  for (size_t i = 0; i < manual["rows"].size(); ++i) {
    EXPECT_DOUBLE_EQ(manual["rows"][i]["target_step_s"].get<double>(),
                     calibrated["rows"][i]["target_step_s"].get<double>());
  }
  const nlohmann::json assumed = Json(plan);
  EXPECT_EQ(assumed["cost_source"], "analytic-roofline");
  EXPECT_NE(assumed["rows"][0]["target_step_s"].get<double>(),
            calibrated["rows"][0]["target_step_s"].get<double>());

  const nlohmann::json sim = Json(
      "sim sd --model mixtral-8x7b --draft llama-3.2-1b --hardware epyc-9654 --alpha 0.8 "
      "--batch 1,16 --gamma 2 --json --calibrate " +
      profile_);
  EXPECT_EQ(sim["cost_source"], "calibrated-roofline");
  EXPECT_DOUBLE_EQ(sim["rows"][0]["target_step_s"].get<double>(),
                   calibrated["rows"][0]["target_step_s"].get<double>());
}

TEST_F(CalibrationCliTest, PlanHardwareListsTheProfiledMachine) {
  const nlohmann::json json =
      Json("plan hardware --model mixtral-8x7b --tpot-max 100 --devices 1 --json --calibrate " +
           profile_);
  bool found = false;
  for (const auto& row : json["rows"]) {
    if (row["hardware"] != "profile:" + profile_) {
      EXPECT_EQ(row["cost_source"], "analytic-roofline");
      continue;
    }
    found = true;
    EXPECT_EQ(row["cost_source"], "calibrated-roofline");
    EXPECT_DOUBLE_EQ(row["memory_bytes"].get<double>(), 24e9);
    EXPECT_FALSE(row["fits_memory"].get<bool>());  // Mixtral-8x7B's 93 GB in bf16 do not fit 24 GB
  }
  EXPECT_TRUE(found);
  ASSERT_EQ(json["cost_calibrations"].size(), 1u);
  const nlohmann::json small =
      Json("plan hardware --model olmoe-1b-7b --tpot-max 100 --devices 1 --json --calibrate " +
           profile_);
  for (const auto& row : small["rows"]) {
    if (row["hardware"] == "profile:" + profile_) {
      EXPECT_TRUE(row["meets"].get<bool>());
    }
  }
}

TEST_F(CalibrationCliTest, SimOffloadPricesTheHostWithTheCalibration) {
  const std::string sim =
      "sim offload --model mixtral-8x7b --hardware rtx-3090 --policy fiddler --prompt 8 --tokens 4 "
      "--seed 1 --json";
  const nlohmann::json calibrated = Json(sim + " --calibrate " + profile_);
  EXPECT_EQ(calibrated["cost_source"], "calibrated-roofline");
  EXPECT_NEAR(calibrated["host_cost_parameters"]["memory_efficiency"].get<double>(),
              truth_.memory_efficiency, 1e-4);
  EXPECT_DOUBLE_EQ(calibrated["cost_parameters"]["memory_efficiency"].get<double>(),
                   0.8);  // no GPU samples
  const nlohmann::json assumed = Json(sim);
  EXPECT_EQ(assumed["cost_source"], "analytic-roofline");
  EXPECT_NE(calibrated["tpot_s"].get<double>(), assumed["tpot_s"].get<double>());
  const nlohmann::json plan = Json(
      "plan offload --model mixtral-8x7b --hardware rtx-3090 --memory 16 --policies fiddler "
      "--tokens 4 --json --calibrate " +
      profile_);
  EXPECT_EQ(plan["cost_source"], "calibrated-roofline");
  EXPECT_EQ(plan["cost_calibrations"].size(), 1u);
}

// "The same on a user's own profile": plan sd's best gamma per batch from a measured profile's
// fitted curves (a real fit of this machine's quick profile, results/fit-latency-quick-cpu.json).
TEST_F(CalibrationCliTest, PlanSdOnAProfileAgreesWithSimSd) {
  const std::string fit = (testing::TestDataDir() / "fits/latency-quick-cpu.json").string();
  const std::string models =
      "--model mixtral-8x7b --draft llama-3.2-1b --batch 1,4 --gamma 1,2 --profile " + fit;
  const nlohmann::json plan = Json("plan sd --alpha 0.8 --json " + models);
  EXPECT_EQ(plan["cost_source"], "fitted-profile");
  EXPECT_EQ(plan["hardware"], "profile:" + fit);
  EXPECT_FALSE(plan.contains("cost_parameters"));  // no roofline was used
  ASSERT_EQ(plan["rows"].size(), 4u);
  ASSERT_EQ(plan["best_gamma"].size(), 2u);
  const nlohmann::json sim = Json("sim sd --alpha 0.8 --json " + models);
  ASSERT_EQ(sim["rows"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_GT(plan["rows"][i]["target_step_s"].get<double>(), 0);
    EXPECT_DOUBLE_EQ(plan["rows"][i]["speedup"].get<double>(),
                     sim["rows"][i]["speedup"].get<double>());
  }
  const CliRun both = RunMoelab("plan sd --hardware epyc-9654 " + models);
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("give --hardware or --profile, not both"), std::string::npos) << both.err;
}

TEST_F(CalibrationCliTest, FitCalibrateShowsTheCalibration) {
  const nlohmann::json json = Json("fit calibrate --json --profile " + profile_);
  EXPECT_EQ(json["schema"], "moelab.cost_calibration/1");
  EXPECT_NEAR(json["parameters"]["compute_efficiency"]["value"].get<double>(),
              truth_.compute_efficiency, 1e-4);
  EXPECT_NEAR(json["parameters"]["memory_efficiency"]["value"].get<double>(),
              truth_.memory_efficiency, 1e-4);
  EXPECT_EQ(json["points"], 33);
  const CliRun table = RunMoelab("fit calibrate --profile " + profile_);
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("compute_efficiency"), std::string::npos) << table.out;
  // Against a preset instead of the measured limits: the same samples, another roofline.
  const nlohmann::json preset =
      Json("fit calibrate --json --hardware epyc-9654 --profile " + profile_);
  EXPECT_NE(preset["roofline"]["source"].get<std::string>().find("epyc-9654"), std::string::npos);
}

TEST_F(CalibrationCliTest, MisuseIsRefused) {
  struct Case {
    std::string args, message;
  };
  const std::string p = " --calibrate " + profile_;
  const Case cases[] = {
      {"plan sd --hardware epyc-9654 --compute-efficiency 0.5" + p,
       "give --compute-efficiency or --calibrate, not both"},
      {"plan sd --hardware a100-80gb-sxm" + p,
       "no samples on device 'gpu', but hardware 'a100-80gb-sxm' computes there"},
      {"plan sd --hardware epyc-9654 --profiled-hardware epyc-9654",
       "--profiled-hardware needs --calibrate"},
      {"sim sd --profile fit.json" + p,
       "give --profile (the fitted curves) or --calibrate (a calibrated preset), not both"},
      {"plan sd --hardware epyc-9654 --calibrate " + (dir_ / "missing.json").string(),
       "missing.json: profile file not found"},
      {"fit calibrate --device gpu --profile " + profile_, "--device gpu needs --hardware"},
      {"fit calibrate --dtype fp8 --profile " + profile_, "has no 'fp8' peak"},
  };
  for (const Case& c : cases) {
    const CliRun r = RunMoelab(c.args);
    EXPECT_EQ(r.status, 1) << c.args;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
}  // namespace moelab::cli
