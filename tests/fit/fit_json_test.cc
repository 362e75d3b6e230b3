#include "fit/fit_json.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "fit/predict.h"
#include "base/error.h"
#include "tests/fit/synthetic.h"
#include "tests/support/test_paths.h"

namespace moelab::fit {
namespace {

SdFit MakeSdFit() {
  std::vector<SdMeasurement> probe(1);
  probe[0].point = {256, 4, 8, 64, 0.5};
  const SdFitScales scales = testing::QwenScales(probe);
  const auto points = testing::SdGrid(testing::PlantedSdParams(scales), scales.ridge_point_tokens,
                                      model::SdDenominator::kAlgorithm1, {1, 2, 8}, {2, 4},
                                      testing::PowersOfTwo(128), 0.01, 3);
  return FitSd(points, testing::QwenScales(points), model::SdDenominator::kAlgorithm1, FitOptions{},
               "grid");
}

LatencyFit MakeLatencyFit() {
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t t : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
    samples.push_back({{"operator", "expert_ffn"},
                       {"device", "cpu"},
                       {"shape", {{"hidden", 64}}},
                       {"tokens", t},
                       {"median_s", 1e-4 + 1e-6 * static_cast<double>(t) * (1 + 0.01 * (t % 3))}});
  }
  for (double bytes : {1e6, 2e6, 4e6}) {
    samples.push_back({{"operator", "memcpy_host"},
                       {"device", "cpu"},
                       {"shape", {{"bytes", bytes}}},
                       {"tokens", 1},
                       {"median_s", 1e-6 + bytes / 1e10}});
  }
  samples.push_back({{"operator", "lm_head"},
                     {"device", "cpu"},
                     {"shape", nlohmann::json::object()},
                     {"tokens", 1},
                     {"median_s", 1e-3}});
  return FitLatency(
      ProfileFromJson({{"schema", "moelab.profile/1"}, {"samples", samples}}, "p.json"),
      FitOptions{});
}

TEST(FitJson, SdRoundTripKeepsEverythingPredictionsNeed) {
  const SdFit fit = MakeSdFit();
  const nlohmann::json json = SdFitToJson(fit);
  EXPECT_EQ(json["schema"], "moelab.fit/1");
  EXPECT_EQ(json["kind"], "sd");
  for (const char* name : model::MoesdParams::kNames) {
    EXPECT_TRUE(json["params"].contains(name)) << name;
    EXPECT_TRUE(json["std_errors"].contains(name)) << name;
  }
  EXPECT_TRUE(json["std_errors"]["bias"].is_null());     // the gauge
  EXPECT_TRUE(json["bounds"]["k1"]["upper"].is_null());  // no upper bound
  for (const char* field : {"rmse", "mape", "r2", "loo_rmse", "n", "denominator",
                            "ridge_point_tokens", "model", "draft", "hardware"}) {
    EXPECT_TRUE(json.contains(field)) << field;
  }
  // Through text, as a file would.
  const SdFit loaded = SdFitFromJson(nlohmann::json::parse(json.dump()), "fit.json");
  EXPECT_EQ(loaded.params.values, fit.params.values);
  EXPECT_EQ(loaded.std_errors, fit.std_errors);
  EXPECT_EQ(loaded.denominator, fit.denominator);
  EXPECT_EQ(loaded.ridge_point_tokens(), fit.ridge_point_tokens());
  EXPECT_EQ(loaded.bounds.lower, fit.bounds.lower);
  EXPECT_EQ(loaded.bounds.upper, fit.bounds.upper);
  EXPECT_EQ(loaded.rmse, fit.rmse);
  EXPECT_EQ(loaded.r2, fit.r2);
  EXPECT_EQ(loaded.loo_rmse, fit.loo_rmse);
  EXPECT_EQ(loaded.n, fit.n);
  EXPECT_EQ(loaded.scales.model, "qwen2-57b-a14b");
  EXPECT_EQ(loaded.gauge_fixed, fit.gauge_fixed);
  EXPECT_EQ(loaded.options.seed, fit.options.seed);
  EXPECT_EQ(SdFitToJson(loaded), json);
  const model::SdPoint point{24, 3, 4, 64, 0.7};
  EXPECT_EQ(PredictSpeedup(loaded, point), PredictSpeedup(fit, point));
}

TEST(FitJson, LatencyRoundTrip) {
  const LatencyFit fit = MakeLatencyFit();
  ASSERT_EQ(fit.operators.size(), 2u);
  ASSERT_EQ(fit.skipped.size(), 1u);
  const nlohmann::json json = LatencyFitToJson(fit);
  EXPECT_EQ(json["kind"], "latency");
  const nlohmann::json& op = json["operators"][0];
  EXPECT_EQ(op["operator"], "expert_ffn");
  for (const char* form : {"interpolated", "roofline", "linear", "constant"}) {
    ASSERT_TRUE(op["forms"].contains(form)) << form;
    for (const char* field : {"params", "std_errors", "rmse", "mape", "r2", "loo_rmse"}) {
      EXPECT_TRUE(op["forms"][form].contains(field)) << form << "." << field;
    }
  }
  EXPECT_TRUE(op["forms"]["roofline"]["params"].contains("P"));
  EXPECT_TRUE(op["forms"]["interpolated"]["params"]["knots"].is_array());
  const LatencyFit loaded = LatencyFitFromJson(nlohmann::json::parse(json.dump()), "fit.json");
  EXPECT_EQ(LatencyFitToJson(loaded), json);
  for (double x : {3.0, 100.0, 1000.0}) {
    for (LatencyForm form : {LatencyForm::kInterpolated, LatencyForm::kRoofline}) {
      EXPECT_EQ(EvaluateLatencyForm(form, loaded.operators[0].Form(form)->params, x),
                EvaluateLatencyForm(form, fit.operators[0].Form(form)->params, x));
    }
    EXPECT_EQ(PredictLatency(loaded, "expert_ffn", "cpu", {{"hidden", 64}}, x),
              PredictLatency(fit, "expert_ffn", "cpu", {{"hidden", 64}}, x));
  }
  EXPECT_EQ(loaded.skipped[0].op, "lm_head");
}

std::string SdLoadError(nlohmann::json json) {
  try {
    SdFitFromJson(json, "fit.json");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(FitJson, SdLoaderValidates) {
  const nlohmann::json good = SdFitToJson(MakeSdFit());
  EXPECT_EQ(SdLoadError(good), "");
  nlohmann::json j = good;
  j["schema"] = "moelab.fit/0";
  EXPECT_NE(SdLoadError(j).find("fit.json: field 'schema'"), std::string::npos);
  j = good;
  j["kind"] = "latency";
  EXPECT_NE(SdLoadError(j).find("'kind'"), std::string::npos);
  j = good;
  j["params"].erase("lambda");
  EXPECT_NE(SdLoadError(j).find("params.lambda"), std::string::npos) << SdLoadError(j);
  j = good;
  j["params"]["s"] = 3.0;  // outside [1, 2]
  EXPECT_NE(SdLoadError(j).find("params.s"), std::string::npos) << SdLoadError(j);
  j = good;
  j["params"]["bias"] = "fast";
  EXPECT_NE(SdLoadError(j).find("params.bias"), std::string::npos);
  j = good;
  j["denominator"] = "eq4";
  EXPECT_NE(SdLoadError(j).find("'denominator'"), std::string::npos);
  j = good;
  j["ridge_point_tokens"] = 0;
  EXPECT_NE(SdLoadError(j).find("ridge_point_tokens"), std::string::npos);
}

TEST(FitJson, LatencyLoaderValidates) {
  const nlohmann::json good = LatencyFitToJson(MakeLatencyFit());
  const auto error = [](const nlohmann::json& j) {
    try {
      LatencyFitFromJson(j, "fit.json");
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(error(good), "");
  nlohmann::json j = good;
  j["operators"][0]["best"] = "cubic";
  EXPECT_NE(error(j).find("operators[0].best"), std::string::npos) << error(j);
  j = good;
  j["operators"][1]["best"] = "roofline";  // the bytes curve has no roofline form
  EXPECT_NE(error(j).find("operators[1].best"), std::string::npos) << error(j);
  j = good;
  j["operators"][0]["forms"]["linear"]["params"].erase("b");
  EXPECT_NE(error(j).find("params.b"), std::string::npos) << error(j);
  j = good;
  j["operators"][0]["forms"]["linear"]["params"]["q"] = 1;
  EXPECT_NE(error(j).find("params.q"), std::string::npos) << error(j);
  for (const nlohmann::json& knots :
       {nlohmann::json::array({{1, 1e-3}}), nlohmann::json::array({{2, 1e-3}, {1, 2e-3}}),
        nlohmann::json::array({{1, 1e-3}, {2, -1e-3}}), nlohmann::json::array({{1, 1e-3}, {2}})}) {
    j = good;
    j["operators"][0]["forms"]["interpolated"]["params"]["knots"] = knots;
    EXPECT_NE(error(j).find("params.knots"), std::string::npos) << knots.dump() << ": " << error(j);
  }
  j = good;
  j["operators"][0]["variable"] = "seconds";
  EXPECT_NE(error(j).find("variable"), std::string::npos);
  EXPECT_THROW(SdFitFromJson(good, "fit.json"), base::Error);  // a latency fit is not an sd fit
  EXPECT_EQ(FitKind(good, "fit.json"), "latency");
}

TEST(FitJson, FileLoaders) {
  const std::filesystem::path dir = testing::MakeTempDir("fit-json");
  std::ofstream(dir / "sd.json") << SdFitToJson(MakeSdFit()).dump(2);
  EXPECT_EQ(LoadSdFit(dir / "sd.json").n, 3 * 2 * 8);
  std::ofstream(dir / "bad.json") << "{\"schema\": ";
  EXPECT_THROW(LoadSdFit(dir / "bad.json"), base::Error);
  try {
    LoadLatencyFit(dir / "absent.json");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json: fit file not found"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// Every fit this repository holds (tests' data, records' runs) still reads now that a field no
// reader asks for is refused: those files were written by fit latency and fit sd, which write
// only what the readers read.
TEST(FitJson, EveryFitFileInTheRepositoryReads) {
  int latency = 0, sd = 0;
  for (const char* folder : {"tests/data", "results"}) {
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(moelab::testing::SourceDir() / folder)) {
      if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      if (text.str().find("\"moelab.fit/1\"") == std::string::npos) continue;
      const nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
      if (json.is_discarded() || !json.is_object() || json.value("schema", "") != "moelab.fit/1")
        continue;  // a file that only mentions the schema (a sweep spec's option)
      try {
        if (FitKind(json, entry.path().string()) == "sd") {
          LoadSdFit(entry.path());
          ++sd;
        } else {
          LoadLatencyFit(entry.path());
          ++latency;
        }
      } catch (const base::Error& e) {
        ADD_FAILURE() << e.what();
      }
    }
  }
  EXPECT_GE(latency, 50);
  EXPECT_GE(sd, 1);
}

TEST(FitJson, AMisspeltFieldOfAFormOrAnSdFitIsRefusedByName) {
  const nlohmann::json latency = LatencyFitToJson(MakeLatencyFit());
  const nlohmann::json sd = SdFitToJson(MakeSdFit());
  const auto refusal = [](const auto& read, const nlohmann::json& json) -> std::string {
    try {
      read(json, "fit.json");
    } catch (const base::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted";
    return "";
  };
  const auto read_latency = [](const nlohmann::json& j, const std::string& o) {
    return LatencyFitFromJson(j, o);
  };
  const auto read_sd = [](const nlohmann::json& j, const std::string& o) {
    return SdFitFromJson(j, o);
  };
  nlohmann::json j = latency;
  const std::string form = j["operators"][0]["best"];
  j["operators"][0]["forms"][form]["loo_rmse_s"] = 1;
  EXPECT_NE(refusal(read_latency, j).find("forms." + form + ".loo_rmse_s': unknown"),
            std::string::npos);
  j = latency;
  j["options"]["seeds"] = 3;
  EXPECT_NE(refusal(read_latency, j).find("'options.seeds': unknown"), std::string::npos);
  for (const auto& [object, field] :
       std::vector<std::pair<std::string, std::string>>{{"params", "lamda"},
                                                        {"scales", "t_dense"},
                                                        {"solver", "seeds"},
                                                        {"covariance", "notes"},
                                                        {"", "rmse_s"}}) {
    j = sd;
    (object.empty() ? j : j[object])[field] = 1;
    const std::string path = object.empty() ? field : object + "." + field;
    EXPECT_NE(refusal(read_sd, j).find("'" + path + "': unknown"), std::string::npos) << path;
  }
  j = sd;
  j["bounds"]["lambda"]["uper"] = 1;
  EXPECT_NE(refusal(read_sd, j).find("'bounds.lambda.uper': unknown"), std::string::npos);
  // What the writers write reads back.
  EXPECT_NO_THROW(SdFitFromJson(sd, "fit.json"));
  EXPECT_NO_THROW(LatencyFitFromJson(latency, "fit.json"));
}

}  // namespace
}  // namespace moelab::fit
