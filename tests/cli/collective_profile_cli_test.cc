// mpirun -n 2 moelab profile --collectives: the collectives timed on two ranks land in the profile
// (rank 0 writes it), fit latency fits them over bytes, and sim ep prices its all-to-alls with them
// (--profile and --calibrate) instead of the node's links; without mpirun the option is refused.
// Skipped (with a message) in builds without MPI.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/mpi_runner.h"
#include "tests/support/test_paths.h"

namespace moelab {
namespace {

using testing::CliRun;
using testing::RunMoelab;

CliRun RunOnRanks(int ranks, const std::string& args) {
  return testing::RunOnRanks(MOELAB_MPIEXEC, MOELAB_BINARY, ranks, args);
}

// The shape tests/data/profiles/quick-cpu.json measured, so its operator samples and the
// collectives measured here make one profile of one model.
const std::string kShape =
    "--model mixtral-8x7b --layers 8 --hidden 1024 --intermediate 3584 --experts 8 --top-k 2 "
    "--heads 16 --kv-heads 4 --head-dim 64 --vocab 32000 --threads 1 ";

class CollectiveProfileCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOELAB_MPIEXEC).empty()) GTEST_SKIP() << testing::kNoMpiBuild;
    dir_ = testing::MakeTempDir("collective-profile");
  }
  std::filesystem::path dir_;
};

TEST_F(CollectiveProfileCli, MeasuredFittedAndPricedBySimEp) {
  const auto profile_path = dir_ / "collectives.json";
  const CliRun profiled = RunOnRanks(2, "profile --collectives --no-operators --quick --quiet " +
                                            kShape + "--json --out " + profile_path.string());
  ASSERT_EQ(profiled.status, 0) << profiled.err;
  const nlohmann::json profile = nlohmann::json::parse(testing::Slurp(profile_path));
  EXPECT_EQ(nlohmann::json::parse(profiled.out), profile);  // rank 0 alone printed
  int all_to_all = 0, all_reduce = 0;
  for (const nlohmann::json& s : profile["samples"]) {
    EXPECT_EQ(s["device"], "mpi");
    EXPECT_EQ(s["shape"]["ranks"], 2);
    EXPECT_EQ(s["shape"]["bytes"], s["bytes"]);
    EXPECT_EQ(s["repetitions"], 5);
    EXPECT_EQ(s["repetition_s"].size(), 5u);
    EXPECT_LE(s["min_s"].get<double>(), s["median_s"].get<double>());
    EXPECT_LE(s["median_s"].get<double>(), s["max_s"].get<double>());
    EXPECT_GT(s["min_s"].get<double>(), 0);
    const int64_t tokens = s["collective"]["tokens_per_rank"].get<int64_t>();
    if (s["operator"] == "all_to_all") {
      ++all_to_all;
      // ceil(tokens x top_k / ranks) rows to the one peer, (hidden + 1) or hidden fp32 values.
      const int64_t rows = (tokens * 2 + 1) / 2;
      const int64_t values = s["collective"]["message"] == "dispatch" ? 1025 : 1024;
      EXPECT_EQ(s["bytes"].get<int64_t>(), rows * values * 4) << s.dump();
    } else {
      ++all_reduce;
      EXPECT_EQ(s["operator"], "all_reduce");
      EXPECT_EQ(s["bytes"].get<int64_t>(), tokens * 1024 * 4);
    }
  }
  EXPECT_EQ(all_to_all, 14);  // 7 token counts x dispatch and combine
  EXPECT_EQ(all_reduce, 7);
  EXPECT_EQ(profile["grid"]["collectives"]["ranks"], 2);

  // Merged with a profile of the operators at the same shape, then fitted.
  nlohmann::json merged =
      nlohmann::json::parse(testing::Slurp(testing::TestDataDir() / "profiles/quick-cpu.json"));
  for (const nlohmann::json& s : profile["samples"]) merged["samples"].push_back(s);
  const auto merged_path = dir_ / "merged.json";
  std::ofstream(merged_path) << merged.dump();
  const auto fit_path = dir_ / "fit.json";
  const CliRun fitted = RunMoelab("fit latency --profile " + merged_path.string() + " --out " +
                                  fit_path.string() + " --json");
  ASSERT_EQ(fitted.status, 0) << fitted.err;
  const nlohmann::json fit = nlohmann::json::parse(testing::Slurp(fit_path));
  bool has_all_to_all = false;
  for (const nlohmann::json& curve : fit["operators"]) {
    if (curve["operator"] != "all_to_all") continue;
    has_all_to_all = true;
    EXPECT_EQ(curve["variable"], "bytes");
    EXPECT_EQ(curve["device"], "mpi");
  }
  EXPECT_TRUE(has_all_to_all) << fit.dump().substr(0, 2000);

  const std::string sim =
      "sim ep --model mixtral-8x7b --hardware 8xh800 --ep 2 --workload decode --batch 8 "
      "--tokens 128 --ep-chunks 2 --json ";
  // (--calibrate takes the same collectives: tests/fit/collective_cost_source_test.cc; sim ep
  // cannot calibrate a GPU node from this CPU profile.)
  const CliRun priced = RunMoelab(sim + "--profile " + fit_path.string());
  ASSERT_EQ(priced.status, 0) << priced.err;
  const nlohmann::json json = nlohmann::json::parse(priced.out);
  EXPECT_EQ(json["collective_cost"]["collective_cost"], "fitted-collectives");
  EXPECT_EQ(json["collective_cost"]["ranks"], 2);
  EXPECT_GT(json["no_pipeline"]["dispatch_s"].get<double>(), 0);
  const CliRun text = RunMoelab(
      "sim ep --model mixtral-8x7b --hardware 8xh800 --ep 2 --workload decode --batch 8 "
      "--tokens 128 --profile " +
      fit_path.string());
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("collectives: fitted-collectives"), std::string::npos) << text.out;
  // Without measured collectives the node's links price them, as before.
  const CliRun links = RunMoelab(sim);
  ASSERT_EQ(links.status, 0) << links.err;
  EXPECT_EQ(nlohmann::json::parse(links.out)["collective_cost"]["collective_cost"], "link-model");
  // Four ranks cannot be priced from two.
  const CliRun four = RunMoelab(
      "sim ep --model mixtral-8x7b --hardware 8xh800 --ep 4 --workload decode --batch 8 "
      "--tokens 128 --profile " +
      fit_path.string());
  EXPECT_EQ(four.status, 1);
  EXPECT_NE(four.err.find("measured on 2 ranks, not the 4"), std::string::npos) << four.err;
}

TEST_F(CollectiveProfileCli, RefusedWithoutRanks) {
  const CliRun alone = RunMoelab("profile --collectives --no-operators --quick " + kShape +
                                 "--out " + (dir_ / "p.json").string());
  EXPECT_EQ(alone.status, 1);
  EXPECT_NE(alone.err.find("--collectives"), std::string::npos) << alone.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "p.json"));
  const CliRun no_collectives =
      RunMoelab("profile --no-operators " + kShape + "--out " + (dir_ / "p.json").string());
  EXPECT_EQ(no_collectives.status, 1);
  EXPECT_NE(no_collectives.err.find("--no-operators needs --collectives"), std::string::npos)
      << no_collectives.err;
}

TEST_F(CollectiveProfileCli, OneRankIsRefusedOnce) {
  const CliRun one = RunOnRanks(1, "profile --collectives --no-operators --quick " + kShape +
                                       "--out " + (dir_ / "p.json").string());
  EXPECT_EQ(one.status, 1);
  EXPECT_NE(one.err.find("collectives need at least 2"), std::string::npos) << one.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "p.json"));
}

}  // namespace
}  // namespace moelab
