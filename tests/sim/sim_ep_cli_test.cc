// moelab sim ep as a user runs it: the interface fields, CSV and the timeline file, and every
// error path (one line on stderr, exit status 1, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::sim {
namespace {

using testing::RunMoelab;
using testing::Slurp;

const char* kDeepSeek =
    "sim ep --model deepseek-v2 --hardware 8xh800 --ep 8 --workload prefill --batch 8 "
    "--tokens 2048 ";

TEST(SimEpCli, JsonHasTheInterfaceFields) {
  const auto r = RunMoelab(std::string(kDeepSeek) + "--ep-chunks auto --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "moelab.sim_ep/1");
  ASSERT_TRUE(json["tokens_per_s"].is_number());
  ASSERT_TRUE(json["gain_vs_no_pipeline"].is_number());
  EXPECT_GT(json["tokens_per_s"].get<double>(), 0);
  EXPECT_GE(json["gain_vs_no_pipeline"].get<double>(), 1.0);
  EXPECT_NEAR(json["gain_vs_no_pipeline"].get<double>(),
              json["no_pipeline"]["step_s"].get<double>() / json["step_s"].get<double>(), 1e-12);
  EXPECT_EQ(json["cost_source"]["cost_source"], "analytic-roofline");
  EXPECT_TRUE(json["provenance"].contains("git_commit"));
  EXPECT_GT(json["sweep"].size(), 1u);
}

TEST(SimEpCli, FixedChunksCsvAndTimeline) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "sim_ep_cli";
  std::filesystem::create_directories(dir);
  const auto timeline = dir / "timeline.json";
  std::filesystem::remove(timeline);
  const auto r = RunMoelab(std::string(kDeepSeek) + "--ep-chunks 4 --timeline " +
                           timeline.string() + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["chunks"], 4);
  const nlohmann::json trace = nlohmann::json::parse(Slurp(timeline.string()));
  int dispatches = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event.value("cat", "") == "dispatch" && event["pid"] == 1) ++dispatches;
  }
  EXPECT_EQ(dispatches, 4);
  const auto csv = RunMoelab(std::string(kDeepSeek) + "--csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("chunks,gemm,dispatch_s", 0), 0u) << csv.out;
  const auto table = RunMoelab(std::string(kDeepSeek));
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_NE(table.out.find("gain"), std::string::npos);
}

// The interface's command names no --batch and no --tokens: one sequence per expert-parallel
// rank (the smallest batch data-parallel attention takes; the default of 1 was refused for any
// --ep above 1) and 2048 tokens, fewer for a model whose context is shorter. Given ones are kept.
TEST(SimEpCli, WithoutBatchAndTokensTheDefaultsFitTheLayout) {
  for (const char* ep : {"2", "8"}) {
    const auto r = RunMoelab(std::string("sim ep --model mixtral-8x7b --hardware 8xh800 --ep ") +
                             ep + " --workload prefill --ep-chunks auto --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const nlohmann::json json = nlohmann::json::parse(r.out);
    EXPECT_EQ(json["workload"]["batch"], std::stoi(ep));
    EXPECT_EQ(json["workload"]["tokens"], 2048);
    EXPECT_GT(json["tokens_per_s"].get<double>(), 0);
    EXPECT_GE(json["gain_vs_no_pipeline"].get<double>(), 1.0);
  }
  const auto model = testing::MakeTempDir("sim_ep_cli_defaults") / "short-context.json";
  nlohmann::json spec =
      nlohmann::json::parse(Slurp((testing::PresetDir() / "models/mixtral-8x7b.json").string()));
  spec["name"] = "short-context";
  spec["max_position_embeddings"] = 1000;
  std::ofstream(model) << spec.dump();
  const auto decode = RunMoelab("sim ep --model " + model.string() +
                                " --hardware 8xh800 --ep 4 --workload decode --json");
  ASSERT_EQ(decode.status, 0) << decode.err;
  EXPECT_EQ(nlohmann::json::parse(decode.out)["workload"]["tokens"], 999);  // + 1 decoded
  const auto given = RunMoelab("sim ep --model " + model.string() +
                               " --hardware 8xh800 --ep 4 --workload prefill --batch 12 "
                               "--tokens 300 --json");
  ASSERT_EQ(given.status, 0) << given.err;
  EXPECT_EQ(nlohmann::json::parse(given.out)["workload"]["batch"], 12);
  EXPECT_EQ(nlohmann::json::parse(given.out)["workload"]["tokens"], 300);
  EXPECT_EQ(RunMoelab("sim ep --model mixtral-8x7b --hardware 8xh800 --ep 2 --batch 1").status, 1);
}

TEST(SimEpCli, BadInputIsOneLineAndNoFile) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "sim_ep_cli_bad";
  std::filesystem::create_directories(dir);
  const auto out = dir / "out.json";
  const std::pair<std::string, std::string> cases[] = {
      {"--hardware 8xh800 --ep 3", "expected a divisor of deepseek-v2's 160 routed experts"},
      {"--hardware 8xh800 --ep 8 --tp 2", "16 devices, but node '8xh800' has 8"},
      {"--hardware 8xh800 --ep 8 --ep-chunks 0", "--ep-chunks"},
      {"--hardware 8xh800 --ep 8 --ep-chunks many", "--ep-chunks"},
      {"--hardware 8xh800 --ep 8 --workload train", "--workload train"},
      {"--ep 8 --hardware 8xh80", "unknown hardware preset '8xh80'"},
  };
  for (const auto& [args, expected] : cases) {
    std::filesystem::remove(out);
    const auto r = RunMoelab("sim ep --model deepseek-v2 --batch 8 --tokens 512 " + args +
                             " --json --out " + out.string());
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

// What a demanding user tried: a TP group across machines, heads that do not split over the
// devices, SM and bandwidth values no device has, a chunk count in a list's words.
TEST(SimEpCli, LayoutsAndRatesNoDeviceHasAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"--model mixtral-8x7b --hardware 2x8xh100-ib --ep 1 --tp 16",
       "--tp 16: a tensor-parallel group is a divisor of one machine's 8 accelerators"},
      {"--model qwen3-30b-a3b --hardware 8xh100-sxm --ep 1 --tp 3",
       "--tp 3: a tensor-parallel group is a divisor of one machine's 8 accelerators"},
      {"--model qwen1.5-moe-a2.7b --hardware 8xh100-sxm --ep 6 --attention tensor-parallel",
       "16 attention heads and 16 KV heads do not split over 6 devices"},
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --comm-saturation-sms 100000",
       "--comm-saturation-sms 100000: expected 1..132"},
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --copy-bandwidth 1e-300",
       "--copy-bandwidth: expected 0"},
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --ep-chunks 2.5",
       "--ep-chunks '2.5': expected a whole number in [1, 4096] or auto"},
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --dtype fp64",
       "no peak FLOP/s for data type 'fp64'"},
      // Kernel options of a choice the run does not make changed nothing, yet were reported.
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --gemm group --gemm-crossover-tokens 100",
       "--gemm-crossover-tokens applies with --gemm auto only"},
      {"--model mixtral-8x7b --hardware 8xh100-sxm --ep 8 --gemm dense --group-gemm-efficiency 0.5",
       "--group-gemm-efficiency applies with --gemm auto or group"},
      // Weights that do not fit the layout's devices were priced as if they did.
      {"--model mixtral-8x22b --hardware 2xrtx-4090 --ep 2",
       "the weights of mixtral-8x22b need 145.9 GB per device laid out --ep 2 x --tp 1"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = RunMoelab("sim ep --workload decode --batch 8 --tokens 512 " + args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_NE(r.err.find(expected), std::string::npos) << args << ": " << r.err;
  }
  // A TP group of a whole single-machine node is a divisor of it, and runs.
  EXPECT_EQ(RunMoelab("sim ep --model mixtral-8x7b --hardware 8xh100-sxm --ep 1 --tp 8 "
                      "--workload decode --batch 8 --tokens 512")
                .status,
            0);
}

}  // namespace
}  // namespace moelab::sim
