// moelab validate end to end on a tiny shape (structure, not accuracy), and routing-aware
// predictions from a trace `moelab run --trace-out` recorded.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::cli {
namespace {

using testing::CliRun;
using testing::RunMoelab;

constexpr char kTinyShape[] =
    " --layers 4 --hidden 128 --intermediate 256 --heads 2 --kv-heads 1 --vocab 512";

TEST(ValidateCli, QuickRunOnATinyShapeWritesTheWholeReport) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-validate");
  // --cache-bytes: the tiny model's weights fit in any L3, and the default (2 x a VM's reported
  // host L3, up to 508 MiB) made building the profile's buffers most of this test's minutes.
  // --profile-rounds 2: the default five rounds of the quick grid took 3.5 of this test's 5.5
  // minutes (14 under the sanitizers); two still interleave (P1 C1 P2).
  const CliRun r =
      RunMoelab(std::string("validate --quick --quiet --cases decode,sd,beam --repeat 1 "
                            "--json --cache-bytes 8MiB --profile-rounds 2 --out ") +
                dir.string() + kTinyShape);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json profile = nlohmann::json::parse(testing::Slurp(dir / "profile.json"));
  EXPECT_EQ(profile["grid"]["repetitions"], 2);
  EXPECT_NE(profile["notes"].dump().find("against a 8388608-byte cache (--cache-bytes)"),
            std::string::npos)
      << profile["notes"];
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "moelab.validation/1");
  ASSERT_TRUE(json["median_abs_error"].is_number());
  EXPECT_GE(json["median_abs_error"].get<double>(), 0.0);
  EXPECT_LE(json["median_abs_error"].get<double>(), json["max_abs_error"].get<double>());
  ASSERT_TRUE(json["cases"].is_array());
  bool kinds[3] = {false, false, false};
  for (const nlohmann::json& c : json["cases"]) {
    for (const char* key :
         {"kind", "batch", "gamma", "prompt", "context", "cost_source", "routing", "predicted",
          "measured", "measured_min", "measured_max", "repeats", "abs_error"}) {
      EXPECT_TRUE(c.contains(key)) << key;
    }
    EXPECT_EQ(c["repeats"], 1);
    EXPECT_GT(c["predicted"].get<double>(), 0.0);
    EXPECT_LE(c["measured_min"].get<double>(), c["measured"].get<double>());
    if (c["kind"] == "decode") {
      // The executor's operator timers next to the prediction's, in the same categories.
      ASSERT_TRUE(c.contains("operators_s")) << c.dump();
      for (const char* category : {"attention", "router", "experts", "lm_head", "other"}) {
        ASSERT_TRUE(c["operators_s"].contains(category)) << category;
        EXPECT_GE(c["operators_s"][category]["predicted"].get<double>(), 0.0) << category;
        EXPECT_GE(c["operators_s"][category]["measured"].get<double>(), 0.0) << category;
      }
      EXPECT_GT(c["operators_s"]["experts"]["measured"].get<double>(), 0.0);
      EXPECT_GT(c["operators_s"]["experts"]["predicted"].get<double>(), 0.0);
    }
    kinds[0] |= c["kind"] == "decode";
    kinds[1] |= c["kind"] == "sd";
    kinds[2] |= c["kind"] == "beam";
    EXPECT_NE(c["kind"], "prefill");  // not asked for
  }
  EXPECT_TRUE(kinds[0] && kinds[1] && kinds[2]);
  EXPECT_FALSE(json["best_gamma"].empty());
  EXPECT_TRUE(json["by_kind"].contains("sd"));
  // The runs' own spread beside the error (repeat 1: no spread, so no prediction inside it
  // unless it equals the single run).
  EXPECT_DOUBLE_EQ(json["by_kind"]["sd"]["median_measured_spread"].get<double>(), 0.0);
  EXPECT_LE(json["by_kind"]["sd"]["predictions_within_spread"].get<int64_t>(),
            json["by_kind"]["sd"]["cases"].get<int64_t>());
  EXPECT_EQ(json["limits_per_round"].size(), 1u);
  // One untimed run in each round before the first case of each model (shape): its caches warm.
  std::set<std::string> shapes;
  for (const nlohmann::json& c : json["cases"]) shapes.insert(c["shape"].get<std::string>());
  EXPECT_EQ(json["warm_up_runs"].get<size_t>(), shapes.size() * json["limits_per_round"].size());
  // Profiled here, its rounds interleaved with the case rounds; no drift term on the predictions.
  EXPECT_EQ(json["profile_interleaved"], true);
  EXPECT_FALSE(json.contains("machine_drift"));
  EXPECT_TRUE(json["provenance"].contains("git_commit"));
  // The headline prices SD from a decode run recorded on its own (what a user has before trying
  // SD); the SD runs' own routing and the uniform formula are reported beside it.
  EXPECT_EQ(json["headline"]["routing"], "decode-trace");
  std::set<std::string> routings;
  for (const nlohmann::json& c : json["cases"]) routings.insert(c["routing_assumed"]);
  EXPECT_EQ(routings, (std::set<std::string>{"decode-trace", "measured", "uniform"}));
  const nlohmann::json decode_trace =
      nlohmann::json::parse(testing::Slurp(dir / "decode-trace.json"));
  for (const nlohmann::json& step : decode_trace["steps"]) EXPECT_NE(step["kind"], "verify");
  for (const char* file :
       {"validation.json", "report.md", "profile.json", "fit.json", "routing-trace.json",
        "decode-trace.json", "predicted-vs-measured-time.dat", "predicted-vs-measured-time.gp",
        "sd-speedup-vs-batch.dat", "sd-speedup-vs-batch.gp"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
  }
  // The gate routing is recorded over as many prompts as the largest batch predicted, so a pass of
  // B sequences can draw B different recorded ones.
  int64_t largest_batch = 0;
  for (const nlohmann::json& c : json["cases"])
    largest_batch = std::max(largest_batch, c["batch"].get<int64_t>());
  const nlohmann::json trace = nlohmann::json::parse(testing::Slurp(dir / "routing-trace.json"));
  ASSERT_FALSE(trace["steps"].empty());
  EXPECT_EQ(trace["steps"][0]["kind"], "prefill");
  EXPECT_EQ(trace["steps"][0]["sequence_tokens"].size(), static_cast<size_t>(largest_batch));
  // The recorded routing is a valid trace the planners accept.
  const CliRun plan = RunMoelab(
      "sim sd --model mixtral-8x7b --draft llama-3.2-1b --hardware 2xa100-80gb-sxm --batch 1,4 "
      "--gamma 2 --alpha 0.8 --json --routing trace:" +
      (dir / "routing-trace.json").string());
  EXPECT_EQ(plan.status, 0) << plan.err;
  // Reused, the profile is not interleaved with the runs, which still run every round.
  // --reused-profile prices the cases again from a profile taken before (here the same one, so
  // its predictions and errors must be the headline's exactly) and reports its error beside.
  const CliRun again = RunMoelab(
      "validate --quick --quiet --cases decode,sd --repeat 1 --json --profile " +
      (dir / "profile.json").string() + " --reused-profile " + (dir / "profile.json").string() +
      " --out " + (dir / "reuse").string() + kTinyShape);
  ASSERT_EQ(again.status, 0) << again.err;
  const nlohmann::json reused_json = nlohmann::json::parse(again.out);
  EXPECT_EQ(reused_json["profile_interleaved"], false);
  ASSERT_FALSE(reused_json["cases"].empty());
  for (const nlohmann::json& c : reused_json["cases"]) EXPECT_EQ(c["repeats"], 1);
  EXPECT_EQ(reused_json["limits_per_round"].size(), 1u);
  EXPECT_EQ(reused_json["headline"]["cost_source"], "fitted-profile");
  ASSERT_TRUE(reused_json.contains("reused_profile")) << again.out.substr(0, 2000);
  const nlohmann::json& reused_profile = reused_json["reused_profile"];
  EXPECT_EQ(reused_profile["cost_source"], "reused-profile");
  EXPECT_EQ(reused_profile["routing"], "decode-trace");
  EXPECT_EQ(reused_profile["path"], (dir / "profile.json").string());
  EXPECT_TRUE(std::filesystem::exists(dir / "reuse" / "reused-fit.json"));
  EXPECT_DOUBLE_EQ(reused_profile["median_abs_error"].get<double>(),
                   reused_json["median_abs_error"].get<double>());
  EXPECT_DOUBLE_EQ(reused_profile["p90_abs_error"].get<double>(),
                   reused_json["p90_abs_error"].get<double>());
  int64_t reused_rows = 0;
  for (const nlohmann::json& c : reused_json["cases"]) {
    if (c["cost_source"] != "reused-profile") continue;
    ++reused_rows;
    bool matched = false;
    for (const nlohmann::json& d : reused_json["cases"]) {
      if (d["cost_source"] == "fitted-profile" && d["label"] == c["label"] &&
          d["routing_assumed"] == c["routing_assumed"]) {
        EXPECT_DOUBLE_EQ(d["predicted"].get<double>(), c["predicted"].get<double>()) << c["label"];
        matched = true;
      }
    }
    EXPECT_TRUE(matched) << c["label"];
  }
  EXPECT_EQ(reused_rows, reused_profile["cases"].get<int64_t>() * 3);  // three routings each
  // A reused profile that measured other formats is refused before anything runs.
  const CliRun other_bits = RunMoelab(
      "validate --quick --quiet --cases decode --repeat 1 --json --expert-bits 8 "
      "--reused-profile " +
      (dir / "profile.json").string() + " --out " + (dir / "q8").string() + kTinyShape);
  EXPECT_NE(other_bits.status, 0);
  EXPECT_NE(other_bits.err.find("field 'model.shape.expert_format'"), std::string::npos)
      << other_bits.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "q8" / "validation.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "q8" / "profile.json"));
  // The profile measured bf16 experts: reusing it for q4_0 runs would price other bytes.
  const CliRun reused = RunMoelab(
      "validate --quick --quiet --cases decode --repeat 1 --json "
      "--expert-bits 4 --profile " +
      (dir / "profile.json").string() + " --out " + (dir / "q4").string() + kTinyShape);
  EXPECT_NE(reused.status, 0);
  EXPECT_NE(reused.err.find("the profile measured expert weights as bf16 (16 bits per weight), not "
                            "q4_0 (validate's runs here: --expert-bits, --attention-bits, "
                            "MOELAB_ISA): field 'model.shape.expert_format'"),
            std::string::npos)
      << reused.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "q4" / "validation.json"));
  // Nor for runs on another kernel path: its curves timed other code.
  ::setenv("MOELAB_ISA", "scalar", 1);
  const CliRun other_path = RunMoelab(
      "validate --quick --quiet --cases decode --repeat 1 --json "
      "--profile " +
      (dir / "profile.json").string() + " --out " + (dir / "scalar").string() + kTinyShape);
  ::unsetenv("MOELAB_ISA");
  EXPECT_NE(other_path.status, 0);
  EXPECT_NE(other_path.err.find("kernels, not scalar (validate's runs here: --expert-bits, "
                                "--attention-bits, MOELAB_ISA): field 'machine.isa'"),
            std::string::npos)
      << other_path.err;
  std::filesystem::remove_all(dir);
}

TEST(ValidateCli, ProfileRoundsAreRefusedWhereNoProfileIsTakenOrOutOfRange) {
  CliRun r = RunMoelab(std::string("validate --quick --profile-rounds 2 --profile missing.json") +
                       kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--profile-rounds sets the rounds of the profile validate takes; with "
                       "--profile it takes none"),
            std::string::npos)
      << r.err;
  r = RunMoelab(std::string("validate --quick --profile-rounds 0") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--profile-rounds 0: expected 1 to 100 rounds"), std::string::npos) << r.err;
  r = RunMoelab(std::string("validate --quick --profile-rounds 101") + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--profile-rounds 101: expected 1 to 100 rounds"), std::string::npos)
      << r.err;
  r = RunMoelab(
      std::string("validate --quick --cases serving --profile-rounds 2 --profile missing.json") +
      kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--profile-rounds sets the rounds of the profile validate takes"),
            std::string::npos)
      << r.err;
}

TEST(ValidateCli, CacheBytesIsRefusedWhereNoProfileIsTaken) {
  CliRun r = RunMoelab("validate --quick --cache-bytes 8MiB --profile missing.json");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cache-bytes sets the cache of the profile validate takes"),
            std::string::npos)
      << r.err;
  r = RunMoelab("validate --quick --cache-bytes 512KiB");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cache-bytes must be between 1 MiB and 64 GiB"), std::string::npos)
      << r.err;
  r = RunMoelab("validate --quick --cache-bytes lots");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cache-bytes"), std::string::npos) << r.err;
}

TEST(ValidateCli, RefusesUnknownCaseKinds) {
  const CliRun r = RunMoelab("validate --quick --cases decode,sprint");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("sprint"), std::string::npos) << r.err;
}

TEST(ValidateCli, DeviceIsCpuOrGpuAndTheGpuRefusesWhatItCannotRun) {
  CliRun r = RunMoelab("validate --quick --device tpu");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--device 'tpu': expected cpu or gpu"), std::string::npos) << r.err;
  r = RunMoelab("validate --quick --device gpu --cases offload");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--cases offload"), std::string::npos) << r.err;
  r = RunMoelab("validate --quick --device gpu --expert-bits 4");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("bf16 weights only"), std::string::npos) << r.err;

  // A reused profile must have measured the GPU: refused before anything runs.
  r = RunMoelab("validate --quick --device gpu --profile " +
                (testing::TestDataDir() / "profiles/quick-cpu.json").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("samples on cuda:0"), std::string::npos) << r.err;

  const CliRun devices = RunMoelab("devices --json");
  ASSERT_EQ(devices.status, 0) << devices.err;
  if (!nlohmann::json::parse(devices.out)["gpus"].empty())
    GTEST_SKIP() << "this machine has a GPU: validate --device gpu would run";
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / "moelab-validate-no-gpu-test";
  std::filesystem::remove_all(dir);
  r = RunMoelab("validate --quick --device gpu --out " + dir.string() + kTinyShape);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--device gpu: "), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "validation.json"));
  std::filesystem::remove_all(dir);
}

TEST(RoutingAwareCli, SimSdTakesTheExecutorsTraceAndKeepsItsRows) {
  const std::filesystem::path dir = testing::MakeTempDir("cli-routing");
  const std::string trace = (dir / "trace.json").string();
  const CliRun run = RunMoelab(
      std::string("run --workload sd --gamma 3 --batch 2 --prompt 8 --tokens 9 --trace-out ") +
      trace + kTinyShape);
  ASSERT_EQ(run.status, 0) << run.err;
  const std::string base =
      "sim sd --model mixtral-8x7b --draft llama-3.2-1b --hardware 2xa100-80gb-sxm --batch 1,8 "
      "--gamma 1,3 --alpha 0.8 --json";
  const CliRun traced = RunMoelab(base + " --routing trace:" + trace);
  const CliRun uniform = RunMoelab(base);
  ASSERT_EQ(traced.status, 0) << traced.err;
  ASSERT_EQ(uniform.status, 0) << uniform.err;
  const nlohmann::json t = nlohmann::json::parse(traced.out),
                       u = nlohmann::json::parse(uniform.out);
  EXPECT_EQ(t["routing"], "trace:" + trace);
  EXPECT_EQ(u["routing"], "uniform");
  ASSERT_EQ(t["rows"].size(), u["rows"].size());
  for (size_t i = 0; i < t["rows"].size(); ++i) {
    for (const char* key :
         {"batch", "gamma", "speedup", "target_step_s", "verify_s", "draft_step_s"}) {
      EXPECT_TRUE(t["rows"][i].contains(key)) << key;
    }
    // A trace can only share experts between tokens, never activate more than uniform routing.
    EXPECT_LE(t["rows"][i]["verify_s"].get<double>(),
              u["rows"][i]["verify_s"].get<double>() * 1.02);
  }
  const CliRun gate = RunMoelab(base + " --routing gate");
  EXPECT_NE(gate.status, 0);
  EXPECT_NE(gate.err.find("trace"), std::string::npos) << gate.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::cli
