// The cost-source chooser (fit/cost_source_options.h): every prediction takes every source the
// same way, and the offload simulator's CPU operations are the fitted curves when a fit prices
// them.
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "fit/fit_json.h"
#include "fit/profile_cost_source.h"
#include "model/moe_math.h"
#include "model/preset_store.h"
#include "fit/cost_source_options.h"
#include "plan/offload_sweep.h"
#include "plan/sd_sweep.h"
#include "sim/cost_model.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::plan {
namespace {

using fit::CostSourceOptions;
using fit::CostSources;
using testing::ErrorOf;

const model::PresetStore& Store() {
  static const model::PresetStore store(testing::PresetDir());
  return store;
}

std::string FitFile() { return (testing::TestDataDir() / "fits/latency-quick-cpu.json").string(); }
std::string ProfileFile() { return (testing::TestDataDir() / "profiles/quick-cpu.json").string(); }

const fit::OperatorCurve& CurveOf(const fit::LatencyFit& fit, const std::string& op,
                                  int64_t context = -1) {
  for (const fit::OperatorCurve& curve : fit.operators) {
    if (curve.op != op || curve.variable != "tokens") continue;
    if (context >= 0 &&
        (!curve.shape.contains("context") || curve.shape["context"].get<int64_t>() != context))
      continue;
    return curve;
  }
  throw base::Error("test fit lacks " + op);
}

// Mixtral on an RTX 3090 priced by `options` (an offload simulation's devices).
sim::SimConfig OffloadConfig(CostSourceOptions options,
                             std::vector<fit::CostCalibration>* made = nullptr) {
  sim::SimConfig config;
  config.model = Store().LoadModel("mixtral-8x7b");
  config.hardware = Store().LoadHardware("rtx-3090");
  options.hardware_given = false;
  CostSources sources(options, Store());
  const std::vector<fit::CostCalibration> calibrations =
      ApplyCostSources(sources, config).calibrations;
  if (made != nullptr) *made = calibrations;
  return config;
}

// sim offload --profile: the CPU's expert, dense-layer and LM-head times are the fitted curves,
// computed here by hand from the fit file.
TEST(CostSources, FittedProfilePricesTheSimulatorsCpuWithTheCurves) {
  const fit::LatencyFit fit = fit::LoadLatencyFit(FitFile());
  CostSourceOptions options;
  options.fitted_profile = FitFile();
  std::vector<fit::CostCalibration> made;
  const sim::SimConfig config = OffloadConfig(options, &made);
  EXPECT_TRUE(made.empty());
  ASSERT_NE(config.host_costs, nullptr);
  ASSERT_NE(config.accelerator_costs, nullptr);
  EXPECT_EQ(sim::CostSourceName(*config.accelerator_costs, *config.host_costs),
            "fitted-profile (host) + analytic-roofline (accelerator)");
  // The fit has no GPU curves: the accelerator keeps its analytic roofline.
  EXPECT_EQ(config.accelerator_costs->name(), "analytic-roofline");
  EXPECT_EQ(config.model.hidden_size, 1024);  // the executor's shape, which the profile measured

  sim::CostModel cost(config.model, config.hardware, 2, config.accelerator_costs,
                      config.host_costs);
  for (int64_t tokens : {1, 7, 64}) {
    const double expected = CurveOf(fit, "expert_ffn").Predict(static_cast<double>(tokens));
    EXPECT_NEAR(cost.ExpertSeconds(policies::Device::kCpu, tokens), expected, 1e-12 * expected);
  }
  for (int64_t batch : {1, 4}) {
    const model::ForwardShape shape{batch, 1, 1024, true};
    const double n = static_cast<double>(batch);
    const double layer =
        CurveOf(fit, "attention_decode", 1024).Predict(n) + CurveOf(fit, "router").Predict(n);
    const sim::CostModel::DenseCost& dense = cost.Dense(policies::Device::kCpu, shape);
    ASSERT_EQ(dense.layer_s.size(), 8u);
    for (double layer_s : dense.layer_s) EXPECT_NEAR(layer_s, layer, 1e-12 * layer);
    EXPECT_NEAR(dense.lm_head_s, CurveOf(fit, "lm_head").Predict(n), 1e-15);
    EXPECT_EQ(dense.embedding_s, 0.0);  // not profiled
  }
  // The accelerator keeps the preset's roofline.
  EXPECT_EQ(cost.Source(policies::Device::kAccelerator).name(), "analytic-roofline");
}

// sim offload --hardware HW.json (moelab hw from-profile: the CPU computes, experts on storage)
// --profile FIT: the CPU's curves price the compute device too, as validate --cases offload does.
TEST(CostSources, FittedProfilePricesTheComputeDeviceOfAStorageTier) {
  sim::SimConfig config;
  config.model = Store().LoadModel("mixtral-8x7b");
  config.hardware = Store().LoadHardware("rtx-3090");
  config.hardware.compute_device_is_host = true;
  CostSourceOptions options;
  options.fitted_profile = FitFile();
  options.hardware_given = false;
  CostSources sources(options, Store());
  EXPECT_TRUE(ApplyCostSources(sources, config).calibrations.empty());
  ASSERT_NE(config.accelerator_costs, nullptr);
  EXPECT_EQ(sim::CostSourceName(*config.accelerator_costs, *config.host_costs), "fitted-profile");
  ASSERT_NE(config.host_costs, nullptr);
  EXPECT_EQ(config.accelerator_costs, config.host_costs);

  // A profile of a machine with a GPU holds GPU curves too; the CPU still computes here.
  fit::LatencyFit fit = fit::LoadLatencyFit(FitFile());
  const size_t cpu_curves = fit.operators.size();
  for (size_t i = 0; i < cpu_curves; ++i) {
    fit::OperatorCurve gpu_curve = fit.operators[i];
    gpu_curve.device = "gpu";
    fit.operators.push_back(gpu_curve);
  }
  const std::filesystem::path dir = testing::MakeTempDir("storage-tier-gpu-fit");
  const std::string both = (dir / "fit-cpu-gpu.json").string();
  std::ofstream(both) << fit::LatencyFitToJson(fit).dump();
  options.fitted_profile = both;
  CostSources with_gpu(options, Store());
  sim::SimConfig gpu_fit_config = config;
  gpu_fit_config.model = Store().LoadModel("mixtral-8x7b");
  gpu_fit_config.accelerator_costs = gpu_fit_config.host_costs = nullptr;
  ApplyCostSources(with_gpu, gpu_fit_config);
  ASSERT_NE(gpu_fit_config.accelerator_costs, nullptr);
  EXPECT_EQ(sim::CostSourceName(*gpu_fit_config.accelerator_costs, *gpu_fit_config.host_costs),
            "fitted-profile");
  ASSERT_NE(gpu_fit_config.host_costs, nullptr);
  EXPECT_EQ(gpu_fit_config.accelerator_costs, gpu_fit_config.host_costs);

  // GPU curves only: nothing prices the CPU that computes.
  fit.operators.erase(fit.operators.begin(),
                      fit.operators.begin() + static_cast<std::ptrdiff_t>(cpu_curves));
  const std::string gpu_only = (dir / "fit-gpu.json").string();
  std::ofstream(gpu_only) << fit::LatencyFitToJson(fit).dump();
  options.fitted_profile = gpu_only;
  CostSources no_cpu(options, Store());
  sim::SimConfig no_cpu_config = config;
  no_cpu_config.model = Store().LoadModel("mixtral-8x7b");
  const std::string error = ErrorOf([&] { ApplyCostSources(no_cpu, no_cpu_config); });
  EXPECT_NE(error.find("the fit has no cpu curves"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(CostSources, CalibrationPricesTheHostAndNamesTheSource) {
  CostSourceOptions options;
  options.calibrate_profile = ProfileFile();
  std::vector<fit::CostCalibration> made;
  const sim::SimConfig config = OffloadConfig(options, &made);
  ASSERT_EQ(made.size(), 1u);  // CPU samples only
  const auto* host = dynamic_cast<const model::RooflineCostSource*>(config.host_costs.get());
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(host->params().compute_efficiency, made[0].params.compute_efficiency);
  EXPECT_EQ(host->name(), "calibrated-roofline");
  EXPECT_EQ(config.accelerator_costs->name(), "analytic-roofline");  // no GPU samples
  EXPECT_EQ(sim::CostSourceName(*config.accelerator_costs, *config.host_costs),
            "calibrated-roofline");
}

TEST(CostSources, OneSourcePerRequestAndClearRefusals) {
  CostSourceOptions both;
  both.fitted_profile = FitFile();
  both.hardware = "rtx-3090";
  EXPECT_NE(ErrorOf([&] { both.Validate(); }).find("give --hardware or --profile, not both"),
            std::string::npos);
  CostSourceOptions efficiencies;
  efficiencies.calibrate_profile = ProfileFile();
  efficiencies.explicit_efficiency = "memory-efficiency";
  EXPECT_EQ(ErrorOf([&] { efficiencies.Validate(); }),
            "give --memory-efficiency or --calibrate, not both (the calibration fits it)");
  CostSourceOptions profiled;
  profiled.profiled_hardware = "epyc-9654";
  EXPECT_EQ(ErrorOf([&] { profiled.Validate(); }),
            "--profiled-hardware needs --calibrate PROFILE.json");
}

// A fit prices the weight formats its profile measured: the executor target takes the fit's
// stored bits (bf16 when the profile predates the fields), and asking for other bits is refused.
TEST(CostSources, ProfiledTargetTakesTheFitsFormatsAndRefusesOthers) {
  CostSourceOptions options;
  options.fitted_profile = FitFile();
  options.hardware_given = false;
  CostSources old_fit(options, Store());
  const model::MoeModelSpec mixtral = Store().LoadModel("mixtral-8x7b");
  EXPECT_EQ(old_fit.ProfiledTarget(mixtral).bits.experts, 16.0);

  fit::LatencyFit fit = fit::LoadLatencyFit(FitFile());
  fit.model.expert_format = "q4_0";
  fit.model.expert_stored_bits = 4.5;
  const std::filesystem::path dir = testing::MakeTempDir("profiled-target");
  const std::string quantized = (dir / "fit-q4.json").string();
  std::ofstream(quantized) << fit::LatencyFitToJson(fit).dump();
  options.fitted_profile = quantized;
  CostSources q4(options, Store());
  const model::MoeModelSpec target = q4.ProfiledTarget(mixtral);
  EXPECT_EQ(target.bits.experts, 4.5);
  EXPECT_EQ(target.bits.attention, 16.0);

  options.expert_bits = 16;
  CostSources asked(options, Store());
  const std::string error = ErrorOf([&] { asked.ProfiledTarget(mixtral); });
  EXPECT_NE(error.find("measured expert weights as q4_0 (4.5 bits per weight), not 16 bits"),
            std::string::npos)
      << error;
  options.expert_bits = 4.5;
  CostSources same(options, Store());
  EXPECT_EQ(same.ProfiledTarget(mixtral).bits.experts, 4.5);
  options.expert_bits = 4;  // what moelab profile --expert-bits took
  CostSources named(options, Store());
  EXPECT_EQ(named.ProfiledTarget(mixtral).bits.experts, 4.5);
  std::filesystem::remove_all(dir);
}

// A fit prices the shape its profile ran (moelab profile --layers 4 --hidden 512 ...): the target
// takes the recorded shape, not the executor's default one, and another model is refused by name.
TEST(CostSources, ProfiledTargetTakesTheFitsShapeAndRefusesAnotherModel) {
  fit::LatencyFit fit = fit::LoadLatencyFit(FitFile());
  fit.model.shape.layers = 4;
  fit.model.shape.hidden = 512;
  fit.model.shape.intermediate = 1024;
  const std::filesystem::path dir = testing::MakeTempDir("profiled-shape");
  const std::string scaled = (dir / "fit-scaled.json").string();
  std::ofstream(scaled) << fit::LatencyFitToJson(fit).dump();
  CostSourceOptions options;
  options.fitted_profile = scaled;
  options.hardware_given = false;
  CostSources sources(options, Store());
  const model::MoeModelSpec target = sources.ProfiledTarget(Store().LoadModel("mixtral-8x7b"));
  EXPECT_EQ(target.num_layers, 4);
  EXPECT_EQ(target.hidden_size, 512);
  EXPECT_EQ(target.moe->expert_intermediate_size, 1024);
  EXPECT_EQ(target.moe->num_experts, 8);
  EXPECT_EQ(target.attention.num_heads, 16);
  // The fitted source accepts it (its shape check compares the fit with this target).
  EXPECT_NE(sources.Fitted(target), nullptr);

  const model::MoeModelSpec qwen = Store().LoadModel("qwen1.5-moe-a2.7b");
  const std::string error = ErrorOf([&] { sources.ProfiledTarget(qwen); });
  EXPECT_NE(error.find("the profile measured 'mixtral-8x7b', not 'qwen1.5-moe-a2.7b'"),
            std::string::npos)
      << error;

  nlohmann::json malformed = fit::LatencyFitToJson(fit);
  malformed["model"]["shape"]["layers"] = "four";
  std::ofstream(scaled) << malformed.dump();
  CostSources bad(options, Store());
  const std::string bad_error =
      ErrorOf([&] { bad.ProfiledTarget(Store().LoadModel("mixtral-8x7b")); });
  EXPECT_NE(bad_error.find("field 'model.shape.layers' must be a non-negative integer"),
            std::string::npos)
      << bad_error;
  std::filesystem::remove_all(dir);
}

// The same SD sweep from the three sources: each names itself; the fitted one's target step is
// the curves' sum.
TEST(CostSources, SdSweepTakesEverySource) {
  SdSweepRequest request;
  request.model = "mixtral-8x7b";
  request.draft = "llama-3.2-1b";
  request.levels = {0.8};
  request.plan.batches = {1, 4};
  request.plan.gammas = {2};
  request.plan.context_length = 1024;
  request.cost.hardware = "epyc-9654";
  EXPECT_EQ(RunSdSweep(request, Store()).source->name(), "analytic-roofline");
  request.cost.calibrate_profile = ProfileFile();
  const SdSweepResult calibrated = RunSdSweep(request, Store());
  EXPECT_EQ(calibrated.source->name(), "calibrated-roofline");
  EXPECT_TRUE(calibrated.calibration.has_value());
  request.cost.calibrate_profile.reset();
  request.cost.hardware_given = false;
  request.cost.fitted_profile = FitFile();
  const SdSweepResult fitted = RunSdSweep(request, Store());
  EXPECT_EQ(fitted.source->name(), "fitted-profile");
  const fit::LatencyFit fit = fit::LoadLatencyFit(FitFile());
  const double n = 4;
  // Each of the 8 experts gets Binomial(4 tokens, 2/8) of them: priced token count by token count.
  double routed = 0;
  const double binomial[] = {0, 4, 6, 4, 1};
  for (int t = 1; t <= 4; ++t) {
    routed += 8 * binomial[t] * std::pow(0.25, t) * std::pow(0.75, 4 - t) *
              CurveOf(fit, "expert_ffn").Predict(t);
  }
  const double expected = 8 * (CurveOf(fit, "attention_decode", 1024).Predict(n) +
                               CurveOf(fit, "router").Predict(n) + routed) +
                          CurveOf(fit, "lm_head").Predict(n);
  EXPECT_NEAR(fitted.levels[0].plan.rows[1].target_step_s, expected, 1e-12 * expected);
}

}  // namespace
}  // namespace moelab::plan
