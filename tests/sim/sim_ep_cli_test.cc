// moelab sim ep as a user runs it: the interface fields, CSV and the timeline file, and every
// error path (one line on stderr, exit status 1, no output file).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"

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

}  // namespace
}  // namespace moelab::sim
