// The result printers and helpers moved out of cli/ (issue 9): model and hardware descriptions,
// the fit texts and their inputs, the run report text, and `sim offload`'s run and report.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "executor/run_report.h"
#include "fit/cost_calibration.h"
#include "fit/fit_report.h"
#include "fit/sd_measurements.h"
#include "model/describe.h"
#include "plan/offload_sweep.h"
#include "plan/reports.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::plan {
namespace {

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(ResultText, ModelAndHardwareDescriptions) {
  const model::PresetStore store = model::PresetStore::Default();
  const model::MoeModelSpec mixtral = store.LoadModel("mixtral-8x7b");
  const nlohmann::json description = model::DescribeModel(mixtral, 0.95);
  EXPECT_EQ(description["t_thres"].get<int64_t>(), 11);
  EXPECT_EQ(description["expert_bytes"].get<int64_t>(), 3LL * 4096 * 14336 * 2);
  const std::string text = model::ModelText(mixtral, description);
  EXPECT_TRUE(Has(text, "T_thres (tau 0.95)")) << text;
  EXPECT_TRUE(Has(text, "experts (E, K)")) << text;

  const model::PresetListing models = model::ListModelPresets(store);
  ASSERT_EQ(models.presets.size(), store.ListModels().size());
  EXPECT_TRUE(Has(models.text, "mixtral-8x7b"));
  const model::PresetListing hardware = model::ListHardwarePresets(store);
  ASSERT_EQ(hardware.presets.size(), store.ListHardware().size());
  EXPECT_TRUE(Has(hardware.text, "Any accelerator composes into a node"));
  const std::string a100 = model::HardwareText(store.LoadHardware("a100-80gb-sxm"));
  EXPECT_TRUE(Has(a100, "memory (each)")) << a100;
}

TEST(ResultText, SdMeasurementFilesCombineWithTheirOrigin) {
  const std::filesystem::path dir = testing::MakeTempDir("measurement-files");
  for (const char* name : {"a.csv", "b.csv"}) {
    std::ofstream(dir / name)
        << "batch,gamma,K,E,sigma,speedup\n1,2,2,8,0.5,1.3\n4,2,2,8,0.5,1.1\n";
  }
  const fit::SdMeasurementSet set =
      fit::LoadSdMeasurementFiles({(dir / "a.csv").string(), (dir / "b.csv").string()});
  EXPECT_EQ(set.measurements.size(), 4u);
  EXPECT_EQ(set.origin, (dir / "a.csv").string() + " + " + (dir / "b.csv").string());
  EXPECT_NE(testing::ErrorOf([&] {
              fit::LoadSdMeasurementFiles({(dir / "none.csv").string()});
            }).find("none.csv"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ResultText, CalibrationRooflineAndText) {
  const fit::Profile profile = fit::LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  EXPECT_NE(testing::ErrorOf([&] {
              fit::ProfiledRoofline(profile, std::nullopt, "gpu", "bf16");
            }).find("--device gpu needs --hardware"),
            std::string::npos);
  const fit::RooflineDevice limits = fit::ProfiledRoofline(profile, std::nullopt, "cpu", "bf16");
  EXPECT_EQ(limits.peak_flops, fit::RooflineFromLimits(profile, "bf16").peak_flops);
  model::CostParameters assumed;
  const fit::CostCalibration calibration =
      fit::CalibrateCosts(profile, limits, assumed, fit::FitOptions{});
  const std::string text = fit::CalibrationText(calibration);
  EXPECT_TRUE(Has(text, "Roofline calibration of ")) << text;
  EXPECT_TRUE(Has(text, "compute_efficiency")) << text;
  EXPECT_TRUE(Has(text, "MAPE calibrated %")) << text;
}

TEST(ResultText, RunReportText) {
  executor::RunResult run;
  run.workload = executor::Workload::kDecode;
  run.model.config.name = "tiny";
  run.model.weight_bytes = 2000.0;
  run.model.weights_source = "synthetic";
  run.batch = 2;
  run.prompt_tokens = 6;
  run.output_tokens = 5;
  run.machine.isa = "avx2";
  run.machine.threads = 2;
  run.ttft_s = 0.002;
  run.tokens_per_s = 12.5;
  run.weight_bytes_per_token = 1024.0;
  run.operator_times.attention_s = 0.001;
  const std::string text = executor::RunReportText(run);
  EXPECT_TRUE(Has(text, "moelab run: decode on tiny (2.00 KB of weights, synthetic), batch 2"))
      << text;
  EXPECT_TRUE(Has(text, "time in attention")) << text;
  EXPECT_TRUE(Has(text, "12.50")) << text;
  EXPECT_FALSE(Has(text, "offload policy")) << text;
}

TEST(ResultText, OffloadRunPricesAndPrintsItself) {
  const model::PresetStore store = model::PresetStore::Default();
  sim::SimConfig config;
  config.model = store.LoadModel("mixtral-8x7b");
  config.hardware = store.LoadHardware("rtx-3090");
  config.policy = "fiddler";
  config.workload.prompt_tokens = 8;
  config.workload.output_tokens = 4;
  config.seed = 1;
  fit::CostSourceOptions cost;
  cost.hardware_given = false;
  cost.assumed.compute_efficiency = 0.5;
  const plan::OffloadRunResult run = plan::RunOffload(config, cost, store);
  EXPECT_EQ(run.cost_parameters.compute_efficiency, 0.5);
  EXPECT_TRUE(run.calibrations.empty());
  const nlohmann::json json = nlohmann::json::parse(plan::Render(run, report::Format::kJson));
  EXPECT_EQ(json["cost_parameters"]["compute_efficiency"], 0.5);
  EXPECT_EQ(json["ttft_s"].get<double>(), run.result.ttft_s);
  EXPECT_TRUE(json.contains("provenance"));
  const std::string csv = plan::Render(run, report::Format::kCsv);
  EXPECT_TRUE(Has(csv.substr(0, csv.find('\n')), "cost_parameters.compute_efficiency")) << csv;
  EXPECT_TRUE(Has(plan::Render(run, report::Format::kTable), "policy fiddler")) << "text";
}

}  // namespace
}  // namespace moelab::plan
