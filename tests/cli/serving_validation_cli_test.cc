// moelab validate --cases serving end to end on a tiny shape, and its refusals.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;

constexpr char kTinyShape[] =
    " --layers 2 --hidden 64 --intermediate 96 --experts 4 --top-k 2 --heads 4 --kv-heads 2"
    " --head-dim 16 --vocab 101 --threads 2";
constexpr char kTinyLoad[] =
    " --requests 16 --prompt-tokens uniform:4,24 --output-tokens uniform:40,120"
    " --overhead-output-tokens 2000 --overhead-pairs 2";

TEST(ServingValidationCli, QuickRunMeasuresAndPredictsEveryRate) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-validate-serving") / "out";
  const CliRun r = RunMoelab(std::string("validate --cases serving --quick --repeat 1 "
                                         "--json --cache-bytes 8MiB --profile-rounds 2 --out ") +
                             dir.string() + kTinyShape + kTinyLoad);
  ASSERT_EQ(r.status, 0) << r.err;
  // The time left counts the overhead pairs, which run last in a round (2,000 output tokens each
  // side: most of the round's predicted time): after the first of two pairs about half of it is
  // left, after the last none.
  const auto left_s = [&](const std::string& what) {
    const std::string line = "validate --cases serving: round 1 " + what + " done; about ";
    const size_t at = r.err.find(line);
    return at == std::string::npos ? -1.0 : std::stod(r.err.substr(at + line.size()));
  };
  const double after_overload = left_s("overload"), after_first = left_s("overhead pair 1/2"),
               after_last = left_s("overhead pair 2/2");
  EXPECT_GT(after_first, 0.3 * after_overload) << r.err;
  EXPECT_LT(after_first, 0.7 * after_overload) << r.err;
  EXPECT_GE(after_last, 0) << r.err;
  EXPECT_LT(after_last, 1e-6) << r.err;  // every run takes off what was budgeted for it
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "moelab.validation_serving/1");
  for (const char* key : {"machine", "model", "scheduler", "load", "saturation", "rates",
                          "below_saturation_median_abs_error", "slo", "serving_overhead", "targets",
                          "notes", "provenance", "engine_iteration", "client_latency_s"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  ASSERT_EQ(json["rates"].size(), 4u);
  double previous = 0;
  for (const nlohmann::json& rate : json["rates"]) {
    EXPECT_GT(rate["rate_per_s"].get<double>(), previous);  // 30, 70, 90, 110 %, ascending
    previous = rate["rate_per_s"].get<double>();
    ASSERT_EQ(rate["runs"].size(), 1u);
    for (const char* side : {"measured", "predicted"}) {
      const nlohmann::json& summary = rate["runs"][0][side];
      EXPECT_EQ(summary["schema"], "moelab.serving/1");
      EXPECT_EQ(summary["completed"], 16) << side;
      EXPECT_EQ(summary["failed"], 0) << side;
      EXPECT_GT(summary["ttft_s"]["p50"].get<double>(), 0) << side;
    }
    // The engine's record of the run: every request it served, its iterations split by kind.
    const nlohmann::json& engine = rate["runs"][0]["engine"];
    EXPECT_EQ(engine["engine_side"]["completed"], 16);
    EXPECT_GT(engine["iterations"].get<int64_t>(), 0);
    EXPECT_LE(engine["decode_only_iterations"].get<int64_t>(), engine["iterations"].get<int64_t>());
    EXPECT_GT(engine["busy_s"].get<double>(), 0);
    // The client sees the first token after the engine emitted it.
    EXPECT_GT(rate["runs"][0]["measured"]["ttft_s"]["p50"].get<double>(),
              engine["engine_side"]["ttft_s"]["p50"].get<double>());
    ASSERT_EQ(rate["errors"].size(), 6u);
    for (const auto& [metric, error] : rate["errors"].items()) {
      EXPECT_TRUE(std::isfinite(error["abs_error"].get<double>())) << metric;
      EXPECT_NEAR(error["abs_error"].get<double>(),
                  std::abs(error["predicted"].get<double>() / error["measured"].get<double>() - 1),
                  1e-9)
          << metric;
    }
  }
  EXPECT_GT(json["engine_iteration"]["scale"].get<double>(), 0);
  EXPECT_GT(json["engine_iteration"]["decode_only_scale"].get<double>(), 0);
  EXPECT_GT(json["engine_iteration"]["with_prefill_scale"].get<double>(), 0);
  EXPECT_GT(json["engine_iteration"]["lone_prefill_scale"].get<double>(), 0);
  // The calibration's view: summed scales beside the medians, lone and mixed prefills counted.
  const nlohmann::json& calibration = json["engine_iteration"]["calibration"];
  EXPECT_GT(calibration["decode_only_median_scale"].get<double>(), 0);
  EXPECT_GE(calibration["lone_prefill_iterations"].get<int64_t>(), 0);
  EXPECT_LE(calibration["lone_prefill_iterations"].get<int64_t>(),
            calibration["iterations"].get<int64_t>() -
                calibration["decode_only_iterations"].get<int64_t>());
  EXPECT_TRUE(calibration.contains("mixed_prefill_scale"));
  EXPECT_EQ(json["engine_iteration"]["requests"], 32);
  EXPECT_EQ(json["engine_iteration"]["burst_requests"], 64);  // the default --max-running
  EXPECT_EQ(json["engine_iteration"]["calibration"]["engine_side"]["completed"], 32 + 64);
  // The wake: 1 + 6 x 5 lone requests; those after the first wake an idle engine (one that a
  // stalled process delays past the next arrival finds the engine busy and is no sample), those
  // planned after 0.05 s of idleness the baseline (a stall can move one across 0.1 s).
  const nlohmann::json& wake = json["engine_iteration"]["wake"];
  EXPECT_EQ(wake["requests"], 31);
  const int64_t samples = wake["samples"].get<int64_t>();
  EXPECT_GE(samples, 20);
  EXPECT_LE(samples, 30);
  if (wake.contains("not_measured")) {  // no idle time under 0.1 s, or none over it
    EXPECT_EQ(wake["magnitude"], 0);
  } else {
    EXPECT_GE(wake["baseline_samples"].get<int64_t>(), 1);
    EXPECT_LT(wake["baseline_samples"].get<int64_t>(), samples);
    EXPECT_GT(wake["magnitude"].get<double>(), -1);
  }
  EXPECT_GT(wake["baseline_ratio"].get<double>(), 0);
  EXPECT_EQ(wake["time_constant_s"], 0.4);
  // Prefill iterations scaled by their prefill tokens: two buckets in every round and view.
  EXPECT_EQ(json["engine_iteration"]["rounds"][0]["prefill_scale_by_tokens"].size(), 2u);
  EXPECT_EQ(calibration["prefill_scale_by_tokens"].size(), 2u);
  // Three first calibrations, their medians the scales.
  ASSERT_EQ(json["engine_iteration"]["first_calibrations"].size(), 3u);
  // The burst reaches decode batches above 32 that the Poisson part alone does not.
  const nlohmann::json& by_batch = json["engine_iteration"]["calibration"]["decode_scale_by_batch"];
  ASSERT_EQ(by_batch.size(), 5u);
  EXPECT_GT(by_batch[3]["iterations"].get<int64_t>(), 0);
  ASSERT_EQ(json["engine_iteration"]["rounds"].size(), 1u);  // --repeat 1
  EXPECT_EQ(json["saturation"]["predicted"], json["saturation"]["predicted_runs"][0]);
  EXPECT_TRUE(std::isfinite(json["below_saturation_median_abs_error_at_run_speed"].get<double>()));
  EXPECT_GT(json["saturation"]["predicted"]["requests_per_s"].get<double>(), 0);
  EXPECT_GT(json["saturation"]["measured"]["requests_per_s"].get<double>(), 0);
  EXPECT_GT(json["serving_overhead"]["ratio"].get<double>(), 0);
  // Two pairs in the one round, each side measured once a pair.
  EXPECT_EQ(json["serving_overhead"]["pairs_per_round"], 2);
  EXPECT_EQ(json["serving_overhead"]["server_tokens_per_s"].size(), 2u);
  EXPECT_EQ(json["serving_overhead"]["run_tokens_per_s"].size(), 2u);
  ASSERT_EQ(json["targets"].size(), 4u);
  // The crossing's diagnostics: one entry a round, each beside that round's own prediction.
  ASSERT_EQ(json["slo"]["rounds"].size(), 1u);
  EXPECT_EQ(json["slo"]["rounds"][0]["round"], 1);
  EXPECT_EQ(json["slo"]["rounds"][0]["predicted_crossing_per_s"],
            json["engine_iteration"]["rounds"][0]["predicted_crossing_per_s"]);
  EXPECT_TRUE(json["slo"].contains("measured_crossing_queueing_form_per_s"));
  // The crossing's conditioning: with every median p99 TTFT 5 % lower the SLO is reached at a
  // higher rate (or not at all), 5 % higher at a lower one (or below the lowest).
  EXPECT_EQ(json["slo"]["measured_p99_shift"].get<double>(), 0.05);
  ASSERT_TRUE(json["slo"].contains("measured_crossing_p99_lower_per_s"));
  ASSERT_TRUE(json["slo"].contains("measured_crossing_p99_higher_per_s"));
  const nlohmann::json& measured_crossing = json["slo"]["measured_crossing_per_s"];
  const nlohmann::json& lower = json["slo"]["measured_crossing_p99_lower_per_s"];
  const nlohmann::json& higher = json["slo"]["measured_crossing_p99_higher_per_s"];
  if (measured_crossing.is_number() && lower.is_number()) {
    EXPECT_GE(lower.get<double>(), measured_crossing.get<double>());
  }
  if (measured_crossing.is_number() && higher.is_number()) {
    EXPECT_LE(higher.get<double>(), measured_crossing.get<double>());
  }
  for (const char* file : {"validation-serving.json", "profile.json", "fit.json", "report.md",
                           "served-iterations.csv"})
    EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
  EXPECT_EQ(nlohmann::json::parse(testing::Slurp(dir / "profile.json"))["grid"]["repetitions"], 2);
  // One CSV row per served iteration of the calibration, the four rate runs and the overload run.
  int64_t iterations = json["engine_iteration"]["iterations"].get<int64_t>();
  for (const nlohmann::json& rate : json["rates"])
    iterations += rate["runs"][0]["engine"]["iterations"].get<int64_t>();
  iterations += json["saturation"]["engine"][0]["iterations"].get<int64_t>();
  iterations += json["engine_iteration"]["wake"]["iterations"].get<int64_t>();
  std::ifstream csv(dir / "served-iterations.csv");
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line,
            "run,start_s,wall_s,composed_s,decodes,decode_context_mean,prefill_chunks,"
            "prefill_tokens,prefill_continuing_chunks,prefill_continuing_tokens,handoff_s,"
            "idle_before_s");
  int64_t rows = 0, wake_rows = 0;
  while (std::getline(csv, line)) {
    ++rows;
    // The continuing chunks are some of the chunks, their tokens some of the tokens; a hand-off
    // is never negative (the engine's clock).
    std::vector<int64_t> fields;
    std::vector<std::string> texts;
    std::stringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) {
      fields.push_back(std::atoll(cell.c_str()));
      texts.push_back(cell);
    }
    ASSERT_EQ(fields.size(), 12u) << line;
    if (texts[0] == "wake") ++wake_rows;
    EXPECT_LE(fields[8], fields[6]) << line;
    EXPECT_LE(fields[9], fields[7]) << line;
    EXPECT_GE(std::stod(texts[10]), 0.0) << line;
    // Idle time: -1 (unknown) or never negative.
    const double idle_s = std::stod(texts[11]);
    EXPECT_TRUE(idle_s == -1 || idle_s >= 0) << line;
  }
  EXPECT_EQ(rows, iterations);
  EXPECT_EQ(wake_rows, json["engine_iteration"]["wake"]["iterations"].get<int64_t>());
}

TEST(ServingValidationCli, RefusesMixedCasesAndBadOptions) {
  CliRun r = RunMoelab("validate --cases serving,decode --quick");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("serving runs alone"), std::string::npos) << r.err;
  r = RunMoelab("validate --cases ep,serving");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("ep runs alone"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --cases serving --quick --requests 0") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--requests 0"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --cases serving --no-such-option") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no-such-option"), std::string::npos) << r.err;
  r = RunMoelab("validate --cases decode --requests 10");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--requests: only with --cases serving"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --cases serving --prompt-tokens uniform:9,3") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--prompt-tokens"), std::string::npos) << r.err;
  // The overhead pair's counts are bounded and named.
  r = RunMoelab(std::string("validate --cases serving --quick --overhead-pairs 0") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--overhead-pairs 0: expected 1..100"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --cases serving --quick --overhead-output-tokens 3") +
                kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--overhead-output-tokens 3: expected 4..65536"), std::string::npos)
      << r.err;
  r = RunMoelab(std::string("validate --cases serving --quick --overhead-pairs 101") + kTinyShape);
  EXPECT_NE(r.err.find("--overhead-pairs 101: expected 1..100"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --cases serving --quick --overhead-output-tokens 65537") +
                kTinyShape);
  EXPECT_NE(r.err.find("--overhead-output-tokens 65537: expected 4..65536"), std::string::npos)
      << r.err;
  // Past the served sequence limit (1,024 KV blocks of 16 tokens, the model's 4,096 positions):
  // refused before the profile, naming the option and the limit.
  r = RunMoelab(std::string("validate --cases serving --quick --overhead-output-tokens 5000") +
                kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--overhead-output-tokens 5000: 8 prompt tokens and these exceed the "
                       "server's sequence limit of 4096"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("profile"), std::string::npos) << r.err;
  r = RunMoelab("validate --cases decode --overhead-pairs 2");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--overhead-pairs: only with --cases serving"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace moelab::cli
