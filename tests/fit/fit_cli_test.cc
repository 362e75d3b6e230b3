// Runs `moelab fit ...` as a user would: output, exit status, files written or not.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fit/fit_json.h"
#include "fit/predict.h"
#include "tests/fit/synthetic.h"
#include "tests/support/cli_runner.h"

namespace moelab::fit {
namespace {

using testing::CliRun;
using testing::Slurp;

class FitCliTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("fit-cli"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  CliRun Run(const std::string& args) {
    const std::string command = std::string(MOELAB_BINARY) + " " + args + " >" +
                                (dir_ / "stdout").string() + " 2>" + (dir_ / "stderr").string();
    const int raw = std::system(command.c_str());
    CliRun result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = Slurp(dir_ / "stdout");
    result.err = Slurp(dir_ / "stderr");
    return result;
  }

  // The planted grid of tests/fit/sd_fit_test.cc as CSV, optionally with a replaced line.
  std::string WriteMeasurements(const std::string& name, size_t rows = 1000,
                                const std::string& replace_row_5 = "",
                                const std::string& header = "batch,gamma,K,E,sigma,speedup") {
    std::vector<SdMeasurement> probe(1);
    probe[0].point = {256, 4, 8, 64, 0.5};
    const SdFitScales scales = testing::QwenScales(probe);
    const auto points = testing::SdGrid(testing::PlantedSdParams(scales), scales.ridge_point_tokens,
                                        model::SdDenominator::kAlgorithm1, {1, 2, 4, 8}, {2, 4},
                                        testing::PowersOfTwo(256), 0.01, 7);
    std::ofstream out(dir_ / name);
    out << header << "\n";
    for (size_t i = 0; i < points.size() && i < rows; ++i) {
      if (i == 5 && !replace_row_5.empty()) {
        out << replace_row_5 << "\n";
        continue;
      }
      const SdMeasurement& m = points[i];
      out << m.point.batch << "," << m.point.gamma << "," << m.point.top_k << ","
          << m.point.num_experts << "," << std::setprecision(17) << m.point.sigma << ","
          << m.speedup << "\n";
    }
    return (dir_ / name).string();
  }

  std::string SdArgs(const std::string& csv) {
    return "fit sd --measurements " + csv +
           " --model qwen2-57b-a14b --draft qwen2-0.5b --hardware 2xa100-80gb-sxm";
  }

  std::filesystem::path dir_;
};

TEST_F(FitCliTest, SdFitWritesTheFitAndPrintsATable) {
  const std::string out = (dir_ / "fit.json").string();
  const CliRun r = Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* text :
       {"bias", "reject_k", "gauge", "rmse", "mape", "R2", "5-fold CV rmse", "wrote"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  const nlohmann::json json = nlohmann::json::parse(Slurp(out));
  EXPECT_EQ(json["schema"], "moelab.fit/1");
  EXPECT_EQ(json["kind"], "sd");
  EXPECT_EQ(json["params"].size(), 10u);
  EXPECT_EQ(json["std_errors"].size(), 10u);
  for (const char* field : {"rmse", "mape", "r2", "loo_rmse", "n", "denominator", "provenance"}) {
    EXPECT_TRUE(json.contains(field)) << field;
  }
  EXPECT_EQ(json["n"], 72);
  EXPECT_EQ(json["denominator"], "algorithm1");
  EXPECT_NE(json["provenance"]["command"].get<std::string>().find("fit sd"), std::string::npos);

  // predict: a plain number, and the same number in JSON, equal to the library's prediction.
  const std::string predict =
      "fit predict --fit " + out + " --batch 24 --gamma 3 --K 6 --E 64 --sigma 0.7";
  const CliRun plain = Run(predict);
  ASSERT_EQ(plain.status, 0) << plain.err;
  const double printed = std::stod(plain.out);
  EXPECT_EQ(plain.out.find('\n'), plain.out.size() - 1);
  const CliRun as_json = Run(predict + " --json");
  ASSERT_EQ(as_json.status, 0) << as_json.err;
  const double speedup = nlohmann::json::parse(as_json.out)["speedup"].get<double>();
  const double expected = PredictSpeedup(LoadSdFit(out), {24, 3, 6, 64, 0.7});
  EXPECT_DOUBLE_EQ(speedup, expected);
  EXPECT_NEAR(printed, expected, 1e-5 * expected);
  const CliRun bad_sigma =
      Run("fit predict --fit " + out + " --batch 24 --gamma 3 --K 6 --E 64 --sigma 1.5");
  EXPECT_EQ(bad_sigma.status, 1);
  EXPECT_NE(bad_sigma.err.find("sigma"), std::string::npos);
}

// --csv: the fit as one row (params.k1, std_errors.k1, bounds.k1.lower, ...), and predict's
// answer as one row; the numbers are the written JSON's, to the last bit.
TEST_F(FitCliTest, SdFitAndPredictCsv) {
  const std::string out = (dir_ / "fit.json").string();
  const CliRun r = Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out + " --starts 2 --csv");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json fit = nlohmann::json::parse(Slurp(out));
  const std::string header = r.out.substr(0, r.out.find('\n'));
  const std::string row = r.out.substr(header.size() + 1);
  ASSERT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  auto cell = [&](const std::string& key) {
    std::stringstream keys(header), cells(row);
    std::string k, c;
    while (std::getline(keys, k, ',') && std::getline(cells, c, ',')) {
      if (k == key) return c;
    }
    ADD_FAILURE() << "no column " << key;
    return std::string();
  };
  EXPECT_EQ(std::stod(cell("params.k1")), fit["params"]["k1"].get<double>());
  EXPECT_EQ(std::stod(cell("bounds.bias.lower")), fit["bounds"]["bias"]["lower"].get<double>());
  EXPECT_EQ(cell("denominator"), "algorithm1");
  EXPECT_EQ(std::stoll(cell("n")), fit["n"].get<int64_t>());

  const CliRun predict =
      Run("fit predict --fit " + out + " --batch 24 --gamma 3 --K 6 --E 64 --sigma 0.7 --csv");
  ASSERT_EQ(predict.status, 0) << predict.err;
  const std::string predict_header = predict.out.substr(0, predict.out.find('\n'));
  // The row has no provenance (the JSON has): plan sd's and sim sd's rows have none either, and
  // a sweep's rows must be the same bytes on any rank at any time.
  EXPECT_EQ(predict_header, "E,K,batch,denominator,fit,gamma,schema,sigma,speedup");
  const double speedup = std::stod(predict.out.substr(predict.out.rfind(',') + 1));
  EXPECT_EQ(speedup, PredictSpeedup(LoadSdFit(out), {24, 3, 6, 64, 0.7}));
}

// moelab sweep over fit predict: a fitted speedup surface as rows, each the command's own CSV row
// for that point, in grid order.
TEST_F(FitCliTest, SweepTabulatesFitPredictPointByPoint) {
  const std::string out = (dir_ / "fit.json").string();
  ASSERT_EQ(Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out + " --starts 2").status, 0);
  const std::string spec = (dir_ / "spec.json").string();
  std::ofstream(spec)
      << nlohmann::json({{"schema", "moelab.sweep_spec/1"},
                         {"command", "fit predict"},
                         {"options", {{"fit", out}, {"K", 6}, {"E", 64}}},
                         {"grid", {{"batch", {1, 24}}, {"gamma", {2, 3}}, {"sigma", {0.5, 0.8}}}}})
             .dump();
  const CliRun sweep = Run("sweep " + spec + " --csv");
  ASSERT_EQ(sweep.status, 0) << sweep.err;
  std::string expected;
  int point = 0;
  for (const char* batch : {"1", "24"}) {
    for (const char* gamma : {"2", "3"}) {
      for (const char* sigma : {"0.5", "0.8"}) {
        const CliRun one = Run("fit predict --fit " + out + " --K 6 --E 64 --batch " + batch +
                               " --gamma " + gamma + " --sigma " + sigma + " --csv");
        ASSERT_EQ(one.status, 0) << one.err;
        const size_t newline = one.out.find('\n');
        if (point == 0)
          expected = "point,grid.batch,grid.gamma,grid.sigma," + one.out.substr(0, newline + 1);
        expected += std::to_string(point++) + "," + batch + "," + gamma + "," + sigma + "," +
                    one.out.substr(newline + 1);
      }
    }
  }
  EXPECT_EQ(sweep.out, expected);
}

TEST_F(FitCliTest, SdFitJsonAndEquation4) {
  const std::string out = (dir_ / "fit.json").string();
  const CliRun r = Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out +
                       " --denominator equation4 --starts 3 --seed 5 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json printed = nlohmann::json::parse(r.out);
  EXPECT_EQ(printed["denominator"], "equation4");
  EXPECT_EQ(printed["solver"]["starts"], 3);
  EXPECT_EQ(printed["solver"]["seed"], 5);
  EXPECT_EQ(nlohmann::json::parse(Slurp(out))["params"], printed["params"]);
}

// Bad data: one line on stderr naming the problem, exit status 1, and no fit file.
TEST_F(FitCliTest, SdFitRefusesBadDataWithoutWritingAFit) {
  struct Case {
    std::string csv;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {WriteMeasurements("nan.csv", 1000, "4,2,1,64,0.8,nan"), "nan.csv:7: field 'speedup'"},
      {WriteMeasurements("negative.csv", 1000, "4,2,1,64,0.8,-1.5"),
       "negative.csv:7: field 'speedup'"},
      {WriteMeasurements("zero.csv", 1000, "4,2,1,64,0.8,0"), "finite number > 0"},
      {WriteMeasurements("sigma.csv", 1000, "4,2,1,64,1.3,1.2"), "field 'sigma'"},
      {WriteMeasurements("few.csv", 9), "9 measurement(s), but the MoESD model has 10 parameters"},
      {WriteMeasurements("header.csv", 1000, "", "batch,gamma,K,E,speedup,sigma"),
       "expected exactly 'batch,gamma,K,E,sigma,speedup'"},
      {(dir_ / "absent.csv").string(), "absent.csv: measurements file not found"},
  };
  for (const Case& c : cases) {
    const std::string out = (dir_ / "never.json").string();
    const CliRun r = Run(SdArgs(c.csv) + " --out " + out);
    EXPECT_EQ(r.status, 1) << c.csv;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << c.csv << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.csv;
  }
  // One batch size.
  std::ofstream one(dir_ / "one.csv");
  one << "batch,gamma,K,E,sigma,speedup\n";
  for (int i = 0; i < 12; ++i)
    one << "8," << (i % 2 ? 2 : 4) << "," << 1 + i % 4 << ",64,0.7," << 1.2 + 0.01 * i << "\n";
  one.close();
  const CliRun r =
      Run(SdArgs((dir_ / "one.csv").string()) + " --out " + (dir_ / "never.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("every measurement is at batch 8"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "never.json"));
}

TEST_F(FitCliTest, SdFitRefusesASolveThatDoesNotConverge) {
  const std::string out = (dir_ / "never.json").string();
  const CliRun r =
      Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out + " --max-iterations 1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("NO_CONVERGENCE"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Issue 13: a fit whose model overflows at a point (k3 near the top of a double; the loader has no
// upper bound for it) used to print "-nan" with exit 0; the prediction is refused instead.
TEST_F(FitCliTest, PredictRefusesANonFiniteSpeedup) {
  const std::string out = (dir_ / "fit.json").string();
  ASSERT_EQ(Run(SdArgs(WriteMeasurements("m.csv")) + " --out " + out).status, 0);
  nlohmann::json fit = nlohmann::json::parse(Slurp(out));
  fit["params"]["k3"] = 1e308;
  std::ofstream(dir_ / "huge.json") << fit.dump();
  const CliRun r = Run("fit predict --fit " + (dir_ / "huge.json").string() +
                       " --batch 256 --gamma 4 --K 8 --E 64 --sigma 0.5");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.err.find("non-finite speedup"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("nan"), std::string::npos) << r.out;
}

TEST_F(FitCliTest, LatencyFitAndPredictRefusesIt) {
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t t : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
    samples.push_back({{"operator", "expert_ffn"},
                       {"device", "cpu"},
                       {"shape", {{"hidden", 64}}},
                       {"tokens", t},
                       {"median_s", 1e-4 + 1e-6 * static_cast<double>(t) * (1 + 0.01 * (t % 3))}});
  }
  samples.push_back({{"operator", "lm_head"},
                     {"device", "cpu"},
                     {"shape", {{"vocab", 10}}},
                     {"tokens", 1},
                     {"median_s", 1e-3}});
  std::ofstream(dir_ / "profile.json")
      << nlohmann::json{{"schema", "moelab.profile/1"}, {"samples", samples}}.dump();
  const std::string out = (dir_ / "latency.json").string();
  const CliRun r =
      Run("fit latency --profile " + (dir_ / "profile.json").string() + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* text : {"expert_ffn", "roofline", "linear", "constant", "skipped: lm_head"}) {
    EXPECT_NE(r.out.find(text), std::string::npos) << text << "\n" << r.out;
  }
  const LatencyFit fit = LoadLatencyFit(out);
  EXPECT_EQ(fit.operators.size(), 1u);
  EXPECT_EQ(fit.skipped.size(), 1u);

  const CliRun predict =
      Run("fit predict --fit " + out + " --batch 1 --gamma 1 --K 1 --E 8 --sigma 0.5");
  EXPECT_EQ(predict.status, 1);
  EXPECT_NE(predict.err.find("a latency fit"), std::string::npos) << predict.err;

  const CliRun missing =
      Run("fit latency --profile " + (dir_ / "none.json").string() + " --out " + out + "2");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("profile file not found"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out + "2"));
}

}  // namespace
}  // namespace moelab::fit
