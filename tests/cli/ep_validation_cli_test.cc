// mpirun -n 2 moelab validate --cases ep --quick: profile (operators and collectives), fit, sim
// ep's prediction and run --expert-parallel's measurement of every case at N = 1, 2, 4, decode and
// prefill, on a small shape, with data-parallel and (from the same profile) tensor-parallel
// attention; --cases ep mixed with other kinds or without mpirun, and --attention elsewhere, are
// refused.
// Skipped (with a message) in builds without MPI. Accuracy is not asserted (a loaded 2-core
// machine): the structure, the measurements being real and the best N being reported are.
#include <cmath>
#include <filesystem>
#include <set>
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

const std::string kShape =
    "--layers 2 --hidden 128 --intermediate 256 --experts 8 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 32 --vocab 512 --max-positions 512 ";

class EpValidationCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOELAB_MPIEXEC).empty()) GTEST_SKIP() << testing::kNoMpiBuild;
  }
};

TEST_F(EpValidationCli, PredictsAndMeasuresEveryChunkCount) {
  const auto out = testing::MakeTempDir("ep-validation") / "out";
  // --cache-bytes and --profile-rounds: the tiny model's operator profile against a small cache,
  // two rounds (the quick grid's three at the reported L3 took most of this test's minutes).
  const CliRun r = RunOnRanks(2, "validate --cases ep --quick --repeat 1 --quiet --json " + kShape +
                                     "--cache-bytes 8MiB --profile-rounds 2 --out " + out.string());
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["schema"], "moelab.validation_ep/1");
  EXPECT_EQ(json["ranks"], 2);
  EXPECT_EQ(json["collective_cost"]["collective_cost"], "fitted-collectives");
  ASSERT_EQ(json["cases"].size(), 6u);  // decode and prefill x N = 1, 2, 4
  std::set<std::string> seen;
  for (const nlohmann::json& c : json["cases"]) {
    seen.insert(c["workload"].get<std::string>() + std::to_string(c["chunks"].get<int>()));
    EXPECT_GT(c["predicted_step_s"].get<double>(), 0) << c.dump();
    EXPECT_GT(c["measured_step_s"].get<double>(), 0) << c.dump();
    // Prefills run three times a round, decodes once.
    EXPECT_EQ(c["runs_step_s"].size(), c["workload"] == "prefill" ? 3u : 1u);
    const double error = c["error"].get<double>();
    EXPECT_TRUE(std::isfinite(error));
    EXPECT_NEAR(error, c["predicted_step_s"].get<double>() / c["measured_step_s"].get<double>() - 1,
                1e-9);
    // The step per layer split into sim ep's terms: the predicted ones add up to the predicted
    // step; the measured ones are the run's own (attention and expert compute timed, never 0).
    const nlohmann::json& predicted = c["predicted_terms_per_layer"];
    const nlohmann::json& measured = c["measured_terms_per_layer"];
    double sum = 0;
    for (const char* term :
         {"attention_s", "expert_compute_s", "exposed_comm_s", "block_other_s", "rest_s"})
      sum += predicted[term].get<double>();
    EXPECT_NEAR(sum, c["predicted_step_per_layer_s"].get<double>(), 1e-12) << c.dump();
    EXPECT_GT(predicted["expert_compute_s"].get<double>(), 0) << c.dump();
    EXPECT_GT(measured["attention_s"].get<double>(), 0) << c.dump();
    EXPECT_GT(measured["expert_compute_s"].get<double>(), 0) << c.dump();
    EXPECT_GE(measured["exposed_comm_s"].get<double>(), 0) << c.dump();
    // Packing rows and combining outputs take time; sim ep prices their copies at the profiled
    // host memcpy.
    EXPECT_GT(measured["block_other_s"].get<double>(), 0) << c.dump();
    EXPECT_GT(predicted["block_other_s"].get<double>(), 0) << c.dump();
    EXPECT_TRUE(std::isfinite(measured["rest_s"].get<double>())) << c.dump();
  }
  // Profiled here: the case rounds ran between the profile's rounds.
  EXPECT_TRUE(json["profile_interleaved"].get<bool>());
  EXPECT_EQ(seen, (std::set<std::string>{"decode1", "decode2", "decode4", "prefill1", "prefill2",
                                         "prefill4"}));
  ASSERT_EQ(json["best_chunks"].size(), 2u);
  for (const nlohmann::json& best : json["best_chunks"]) {
    EXPECT_TRUE(std::set<int>({1, 2, 4}).count(best["predicted_chunks"].get<int>()));
    EXPECT_TRUE(std::set<int>({1, 2, 4}).count(best["measured_chunks"].get<int>()));
    // The regret: the predicted N's measured step over the measured best's; with a sign test of
    // their paired runs, so that a wrong N the noise cannot resolve says so.
    double predicted_s = 0, best_s = 0;
    for (const nlohmann::json& c : json["cases"]) {
      if (c["workload"] != best["workload"]) continue;
      if (c["chunks"] == best["predicted_chunks"]) predicted_s = c["measured_step_s"];
      if (c["chunks"] == best["measured_chunks"]) best_s = c["measured_step_s"];
    }
    EXPECT_NEAR(best["regret"].get<double>(), predicted_s / best_s - 1, 1e-12) << best.dump();
    EXPECT_GE(best["regret"].get<double>(), 0) << best.dump();
    EXPECT_LE(best["measured_best_faster_runs"].get<int>(), best["paired_runs"].get<int>());
    EXPECT_GT(best["sign_test_p"].get<double>(), 0);
    EXPECT_LE(best["sign_test_p"].get<double>(), 1);
  }
  EXPECT_TRUE(std::filesystem::exists(out / "validation-ep.json"));
  const nlohmann::json profile = nlohmann::json::parse(testing::Slurp(out / "profile.json"));
  EXPECT_EQ(profile["grid"]["collectives"]["ranks"], 2);
  EXPECT_EQ(profile["grid"]["repetitions"], 2);
  EXPECT_NE(profile["notes"].dump().find("against a 8388608-byte cache (--cache-bytes)"),
            std::string::npos)
      << profile["notes"];
  EXPECT_EQ(json["attention"], "data-parallel");

  // Tensor-parallel attention, from the same profile: every case predicted (sim ep --attention
  // tensor-parallel) and measured (run --attention tensor-parallel), and said so.
  const CliRun tp =
      RunOnRanks(2, "validate --cases ep --quick --repeat 1 --quiet --json " + kShape +
                        "--attention tensor-parallel --profile " + (out / "profile.json").string() +
                        " --out " + (out.parent_path() / "tp").string());
  ASSERT_EQ(tp.status, 0) << tp.err;
  const nlohmann::json tp_json = nlohmann::json::parse(tp.out);
  EXPECT_EQ(tp_json["attention"], "tensor-parallel");
  EXPECT_FALSE(tp_json["profile_interleaved"].get<bool>());  // a reused profile
  ASSERT_EQ(tp_json["cases"].size(), 6u);
  for (const nlohmann::json& c : tp_json["cases"]) {
    EXPECT_GT(c["predicted_step_s"].get<double>(), 0) << c.dump();
    EXPECT_GT(c["measured_step_s"].get<double>(), 0) << c.dump();
  }
  // The layouts are priced apart (tensor-parallel splits every sequence's attention over the
  // ranks and adds a reduce-scatter and an all-gather a layer): the predictions differ.
  EXPECT_NE(tp_json["cases"][0]["predicted_step_s"], json["cases"][0]["predicted_step_s"]);
}

TEST_F(EpValidationCli, RefusedMixedOrWithoutRanks) {
  const CliRun mixed = RunMoelab("validate --cases ep,decode --quick " + kShape);
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.err.find("ep runs alone"), std::string::npos) << mixed.err;
  const CliRun alone = RunMoelab("validate --cases ep --quick " + kShape);
  EXPECT_EQ(alone.status, 1);
  EXPECT_NE(alone.err.find("--cases ep"), std::string::npos) << alone.err;
  const CliRun elsewhere = RunMoelab("validate --cases decode --quick --attention tensor-parallel");
  EXPECT_EQ(elsewhere.status, 1);
  EXPECT_NE(elsewhere.err.find("--attention splits attention across MPI ranks: it goes with "
                               "--cases ep"),
            std::string::npos)
      << elsewhere.err;
  // The operator profile's options apply to the profile --cases ep takes, and to none it reuses.
  const CliRun reused =
      RunMoelab("validate --cases ep --quick --cache-bytes 8MiB --profile p.json " + kShape);
  EXPECT_EQ(reused.status, 1);
  EXPECT_NE(reused.err.find("--cache-bytes sets the profile validate takes; with --profile it "
                            "takes none"),
            std::string::npos)
      << reused.err;
  const CliRun rounds = RunMoelab("validate --cases ep --quick --profile-rounds 101 " + kShape);
  EXPECT_EQ(rounds.status, 1);
  EXPECT_NE(rounds.err.find("--profile-rounds 101: expected 1 to 100"), std::string::npos)
      << rounds.err;
  const CliRun unknown = RunOnRanks(2, "validate --cases ep --quick --attention ring " + kShape);
  EXPECT_NE(unknown.status, 0);
  EXPECT_NE(unknown.err.find("--attention must be data-parallel or tensor-parallel"),
            std::string::npos)
      << unknown.err;
}

}  // namespace
}  // namespace moelab
