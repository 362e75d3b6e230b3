// moelab run --expert-parallel under mpirun: routed experts on two ranks give the one-process
// run's greedy tokens (contiguous and interleaved placements, one and several pipeline chunks,
// auto), the expert_parallel fields are real measurements, and bad input is refused once, on rank
// 0, with every rank exiting non-zero. Skipped (with a message) in builds without MPI.
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

// 8 experts, top-2, two MoE layers: every rank gets tokens for both ranks' experts.
const std::string kShape =
    "run --layers 2 --hidden 64 --intermediate 96 --experts 8 --top-k 2 --heads 4 --kv-heads 2 "
    "--head-dim 16 --vocab 101 --threads 1 --seed 7 ";
const std::string kDecode = kShape + "--workload decode --batch 4 --prompt 9 --tokens 6 --json ";

int Count(const std::string& text, const std::string& word) {
  int count = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++count;
  return count;
}

class ExpertParallelCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(MOELAB_MPIEXEC).empty()) GTEST_SKIP() << testing::kNoMpiBuild;
  }
};

TEST_F(ExpertParallelCli, GreedyTokensIdenticalToOneProcess) {
  const CliRun one = RunMoelab(kDecode);
  ASSERT_EQ(one.status, 0) << one.err;
  const nlohmann::json reference = nlohmann::json::parse(one.out);
  ASSERT_EQ(reference["outputs"].size(), 4u);
  for (const std::string chunks : {"1", "3", "auto"}) {
    const CliRun two = RunOnRanks(2, kDecode + "--expert-parallel 2 --ep-chunks " + chunks);
    ASSERT_EQ(two.status, 0) << two.err;
    const nlohmann::json json = nlohmann::json::parse(two.out);  // rank 0 alone printed
    EXPECT_EQ(json["outputs"], reference["outputs"]) << "--ep-chunks " << chunks;
    // The same fields as the one-process run, plus expert_parallel.
    for (const auto& [field, value] : reference.items()) {
      if (field != "expert_token_counts") {
        EXPECT_TRUE(json.contains(field)) << field;
      }
    }
    const nlohmann::json& ep = json["expert_parallel"];
    EXPECT_EQ(ep["ranks"], 2);
    if (chunks != "auto") {
      EXPECT_EQ(ep["chunks"].get<int64_t>(), std::stoll(chunks));
    }
    EXPECT_EQ(ep["chunks_auto"].get<bool>(), chunks == "auto");
    EXPECT_EQ(ep["placement"], nlohmann::json({0, 0, 0, 0, 1, 1, 1, 1}));
    for (const char* field : {"dispatch_s", "combine_s", "expert_compute_s"})
      EXPECT_GT(ep[field].get<double>(), 0) << field;
    EXPECT_GE(ep["exposed_comm_s"].get<double>(), 0);
    ASSERT_EQ(ep["layers"].size(), 2u);
    for (const nlohmann::json& layer : ep["layers"])
      EXPECT_GT(layer["dispatch_s"].get<double>(), 0);
    // Rank 0 sent its 2 sequences' rows: (9 prompt + 5 decode) tokens x 2 sequences x top-2 x 2
    // layers.
    EXPECT_EQ(ep["rows_sent"], 14 * 2 * 2 * 2);
    // The same times split by pass: the prefill's and the decode steps' add up to the totals.
    for (const char* field :
         {"dispatch_s", "combine_s", "expert_compute_s", "exposed_comm_s", "other_s"}) {
      const double prefill = ep["by_step_kind"]["prefill"][field].get<double>();
      const double decode = ep["by_step_kind"]["decode"][field].get<double>();
      EXPECT_NEAR(prefill + decode, ep[field].get<double>(), 1e-9) << field;
      if (std::string(field) != "exposed_comm_s") {
        EXPECT_GT(prefill, 0) << field;
        EXPECT_GT(decode, 0) << field;
      }
    }
    const nlohmann::json& by_kind = json["operator_times_by_step_kind_s"];
    for (const char* op : {"attention", "experts", "lm_head"}) {
      EXPECT_GT(by_kind["prefill"][op].get<double>(), 0) << op;
      EXPECT_GT(by_kind["decode"][op].get<double>(), 0) << op;
      EXPECT_NEAR(by_kind["prefill"][op].get<double>() + by_kind["decode"][op].get<double>(),
                  json["operator_times_s"][op].get<double>(), 1e-9)
          << op;
    }
  }
}

TEST_F(ExpertParallelCli, PrefillAndAPlacementFileGiveTheSameTokens) {
  const std::filesystem::path dir = testing::MakeTempDir("ep-placement");
  const std::filesystem::path placement = dir / "placement.json";
  std::ofstream(placement) << R"({"schema": "moelab.expert_placement/1",
                                  "ranks": [[1, 3, 5, 7], [0, 2, 4, 6]]})";
  const CliRun one = RunMoelab(kDecode);
  ASSERT_EQ(one.status, 0) << one.err;
  const CliRun two = RunOnRanks(
      2, kDecode + "--expert-parallel 2 --ep-chunks 2 --placement " + placement.string());
  ASSERT_EQ(two.status, 0) << two.err;
  const nlohmann::json json = nlohmann::json::parse(two.out);
  EXPECT_EQ(json["outputs"], nlohmann::json::parse(one.out)["outputs"]);
  EXPECT_EQ(json["expert_parallel"]["placement"], nlohmann::json({1, 0, 1, 0, 1, 0, 1, 0}));

  // A prefill of an odd batch over two ranks (2 + 3 sequences): the job's tokens per second.
  const CliRun prefill =
      RunOnRanks(2, kShape +
                        "--workload prefill --batch 5 --prompt 7 --tokens 1 --json "
                        "--expert-parallel 2");
  ASSERT_EQ(prefill.status, 0) << prefill.err;
  const nlohmann::json p = nlohmann::json::parse(prefill.out);
  EXPECT_GT(p["tokens_per_s"].get<double>(), 0);
  EXPECT_EQ(p["step_times"][0]["tokens"], 5 * 7);
  std::filesystem::remove_all(dir);
}

// --ep-chunks auto with an odd batch: the ranks route 1 and 2 sequences, and the measurement
// before the run exchanged their own (different) sizes, which MPI refused as "message truncated".
TEST_F(ExpertParallelCli, AutoChunksWithAnOddBatchGiveTheOneProcessTokens) {
  const std::string odd = kShape + "--workload decode --batch 3 --prompt 9 --tokens 4 --json ";
  const CliRun one = RunMoelab(odd);
  ASSERT_EQ(one.status, 0) << one.err;
  const CliRun two = RunOnRanks(2, odd + "--expert-parallel 2 --ep-chunks auto");
  ASSERT_EQ(two.status, 0) << two.err;
  const nlohmann::json json = nlohmann::json::parse(two.out);
  EXPECT_EQ(json["outputs"], nlohmann::json::parse(one.out)["outputs"]);
  EXPECT_TRUE(json["expert_parallel"]["chunks_auto"].get<bool>());
}

// EPS-MoE's split by expert: a prefill's layer (every expert active: 4 sequences x 9 tokens x
// top-2 over 8 experts) calls each of a rank's 4 experts once whatever N <= 4, where a split by
// tokens would call an expert once per chunk it had rows in (reading its weights again each time).
TEST_F(ExpertParallelCli, ChunksSplitTheExpertsSoEachRunsOncePerLayer) {
  const std::string prefill = kShape + "--workload prefill --batch 4 --prompt 9 --tokens 1 --json ";
  for (const std::string chunks : {"1", "2", "4"}) {
    const CliRun run = RunOnRanks(2, prefill + "--expert-parallel 2 --ep-chunks " + chunks);
    ASSERT_EQ(run.status, 0) << run.err;
    const nlohmann::json ep = nlohmann::json::parse(run.out)["expert_parallel"];
    EXPECT_EQ(ep["expert_ffn_calls"], 4 * 2) << "--ep-chunks " << chunks;  // 4 experts, 2 layers
  }
  // Beyond the active experts each expert's rows are split: 8 chunks, 2 per expert.
  const CliRun split = RunOnRanks(2, prefill + "--expert-parallel 2 --ep-chunks 8");
  ASSERT_EQ(split.status, 0) << split.err;
  EXPECT_EQ(nlohmann::json::parse(split.out)["expert_parallel"]["expert_ffn_calls"], 8 * 2);
}

// Bad input: one line from rank 0 (not one per rank), every rank non-zero, no hang.
void ExpectRefused(const CliRun& run, const std::string& words) {
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find(words), std::string::npos) << run.err;
  EXPECT_EQ(Count(run.err, "moelab: error:"), 1) << run.err;
  EXPECT_TRUE(run.out.empty()) << run.out;
}

TEST_F(ExpertParallelCli, BadInputIsRefusedOnceByEveryRank) {
  const std::filesystem::path dir = testing::MakeTempDir("ep-bad");
  // Experts the ranks cannot share evenly (7 over 2).
  ExpectRefused(
      RunOnRanks(2, std::string(kDecode).replace(kDecode.find("--experts 8"), 11, "--experts 7") +
                        "--expert-parallel 2"),
      "--expert-parallel 2 does not divide the 7 routed experts");
  // A placement that leaves expert 6 out.
  const std::filesystem::path missing = dir / "missing.json";
  std::ofstream(missing) << R"({"schema": "moelab.expert_placement/1",
                                "ranks": [[0, 1, 2, 3], [4, 5, 7]]})";
  ExpectRefused(RunOnRanks(2, kDecode + "--expert-parallel 2 --placement " + missing.string()),
                "expert 6 is on no rank");
  // --expert-parallel 3 under mpirun -n 2.
  ExpectRefused(RunOnRanks(2, kDecode + "--expert-parallel 3"),
                "--expert-parallel 3, but mpirun started 2 ranks");
  // Ranks given different options (a different seed on rank 1): their start hashes differ.
  const std::string other = std::string(kDecode).replace(kDecode.find("--seed 7"), 8, "--seed 8");
  ExpectRefused(RunOnRanks(1, kDecode + "--expert-parallel 2 : -n 1 " + MOELAB_BINARY + " " +
                                  other + "--expert-parallel 2"),
                "rank 1 runs a different build, model file, weights or options");
  // Naming what each rank runs, so the difference can be read off.
  const CliRun mixed = RunOnRanks(1, kDecode + "--expert-parallel 2 : -n 1 " + MOELAB_BINARY + " " +
                                         other + "--expert-parallel 2");
  EXPECT_NE(mixed.err.find("rank 0: moelab "), std::string::npos) << mixed.err;
  EXPECT_NE(mixed.err.find(" seed 7 "), std::string::npos) << mixed.err;
  EXPECT_NE(mixed.err.find(" seed 8 "), std::string::npos) << mixed.err;
  // Tensor-parallel attention splits the KV heads: 1 KV head on 2 ranks, and quantized attention
  // weights, are refused by every rank before any weight is built.
  ExpectRefused(
      RunOnRanks(2, std::string(kDecode).replace(kDecode.find("--kv-heads 2"), 12, "--kv-heads 1") +
                        "--expert-parallel 2 --attention tensor-parallel"),
      "1 KV heads do not divide by 2 ranks");
  ExpectRefused(RunOnRanks(2, kDecode + "--attention-bits 8 --expert-parallel 2 "
                                        "--attention tensor-parallel"),
                "--attention tensor-parallel runs bf16 attention weights");
  ExpectRefused(RunOnRanks(2, kDecode + "--expert-parallel 2 --attention sequence-parallel"),
                "--attention must be data-parallel or tensor-parallel");
  std::filesystem::remove_all(dir);
}

// The interface's own command, `mpirun -n 2 moelab run --expert-parallel 2 --json`, gives no
// --batch: data-parallel attention then runs one sequence per rank (the default batch of 1 was
// refused as below the ranks). A --batch given below the ranks is still refused, by name.
TEST_F(ExpertParallelCli, WithoutABatchEachRankRunsOneSequence) {
  const std::string no_batch = kShape + "--workload decode --prompt 5 --tokens 3 --json ";
  const CliRun two = RunOnRanks(2, no_batch + "--expert-parallel 2");
  ASSERT_EQ(two.status, 0) << two.err;
  const nlohmann::json json = nlohmann::json::parse(two.out);
  EXPECT_EQ(json["batch"], 2);
  EXPECT_EQ(json["outputs"].size(), 2u);
  EXPECT_EQ(json["expert_parallel"]["ranks"], 2);
  // The same two sequences as one process given --batch 2.
  const CliRun one = RunMoelab(no_batch + "--batch 2");
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_EQ(json["outputs"], nlohmann::json::parse(one.out)["outputs"]);
  ExpectRefused(RunOnRanks(2, no_batch + "--batch 1 --expert-parallel 2"),
                "--batch 1 is below --expert-parallel 2");
  // Tensor-parallel attention takes any batch: the default of 1 stays.
  const CliRun tensor_parallel =
      RunOnRanks(2, no_batch + "--expert-parallel 2 --attention tensor-parallel");
  ASSERT_EQ(tensor_parallel.status, 0) << tensor_parallel.err;
  EXPECT_EQ(nlohmann::json::parse(tensor_parallel.out)["batch"], 1);
}

// --attention tensor-parallel: each rank holds half the heads and every sequence; the greedy
// tokens are the one-process run's (the output projection's sum re-associated over the two ranks
// moves logits by float32 rounding only, and this run has no near-tie), with a batch below the
// rank count too (data-parallel attention refuses one); the reduce-scatter and the gather are
// timed. Batch 1 with a 9-token prompt: the ranks' shares of a decode step's single token are 0
// and 1 rows.
TEST_F(ExpertParallelCli, TensorParallelAttentionGivesTheOneProcessTokens) {
  for (const std::string batch : {"--batch 4 ", "--batch 1 "}) {
    const std::string decode = std::string(kDecode).replace(kDecode.find("--batch 4 "), 10, batch);
    const CliRun one = RunMoelab(decode);
    ASSERT_EQ(one.status, 0) << one.err;
    const nlohmann::json reference = nlohmann::json::parse(one.out);
    for (const std::string chunks : {"1", "2"}) {
      const CliRun two = RunOnRanks(2, decode +
                                           "--expert-parallel 2 --attention tensor-parallel "
                                           "--ep-chunks " +
                                           chunks);
      ASSERT_EQ(two.status, 0) << two.err;
      const nlohmann::json json = nlohmann::json::parse(two.out);
      EXPECT_EQ(json["outputs"], reference["outputs"]) << batch << "--ep-chunks " << chunks;
      const nlohmann::json& ep = json["expert_parallel"];
      EXPECT_EQ(ep["attention"], "tensor-parallel");
      EXPECT_GT(ep["attention_reduce_s"].get<double>(), 0) << ep;
      EXPECT_GT(ep["moe_gather_s"].get<double>(), 0) << ep;
      EXPECT_GT(ep["logits_gather_s"].get<double>(), 0) << ep;
      // Tokens are counted once, not once per rank: the same per-token rate fields as one
      // process's.
      EXPECT_EQ(json["step_times"].size(), reference["step_times"].size());
      for (size_t i = 0; i < json["step_times"].size(); ++i) {
        EXPECT_EQ(json["step_times"][i]["tokens"], reference["step_times"][i]["tokens"]) << i;
      }
    }
  }
  // The prefill workload, and a 4-rank split of 2 KV heads is refused (KV heads per rank < 1).
  const std::string prefill = kShape + "--workload prefill --batch 2 --prompt 16 --json ";
  const CliRun prefilled =
      RunOnRanks(2, prefill + "--expert-parallel 2 --attention tensor-parallel");
  ASSERT_EQ(prefilled.status, 0) << prefilled.err;
  EXPECT_GT(nlohmann::json::parse(prefilled.out)["tokens_per_s"].get<double>(), 0);
}

// A rank killed mid-run (kill -9, so it never reaches a collective again): the job ends with a
// non-zero status instead of hanging (timeout's 124 would say it hung). The job is far longer than
// the kill's wait on any machine (60,000 decode steps over a growing KV cache; 4,000 ended within
// a second on a fast CI machine before the kill came), and the rank is killed as soon as both are
// seen, so it cannot end on its own first; a kill that finds no rank says so.
TEST_F(ExpertParallelCli, ADeadRankEndsTheJob) {
  const std::string binary = MOELAB_BINARY;
  // A seed no other test uses names this job's ranks for pgrep.
  const std::string args = std::string(kShape).replace(kShape.find("--seed 7"), 8, "--seed 90417") +
                           "--workload decode --batch 2 --prompt 4 --tokens 60000 "
                           "--max-positions 60004 --expert-parallel 2";
  const std::string ranks = "pgrep -f '^" + binary + " run .*--seed 90417'";
  const std::string script =
      "{ OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
      "OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "
      "timeout 120 " +
      std::string(MOELAB_MPIEXEC) + " -n 2 " + binary + " " + args +
      " & job=$!; for i in $(seq 300); do [ \"$(" + ranks +
      " | wc -l)\" -ge 2 ] && break; sleep 0.1; done; sleep 0.2; victim=$(" + ranks +
      " | tail -1); if [ -z \"$victim\" ]; then echo 'no rank left to kill' >&2; wait $job; "
      "exit 99; fi; kill -9 $victim; wait $job; }";
  const CliRun run = testing::RunShell(script);
  EXPECT_NE(run.status, 99) << "the job ended before a rank could be killed: " << run.err;
  EXPECT_NE(run.status, 0) << run.err;
  EXPECT_NE(run.status, 124) << "the job hung after a rank died: " << run.err;
}

TEST_F(ExpertParallelCli, WithoutMpirunItSaysHowToStartRanks) {
  const CliRun r = RunMoelab(kDecode + "--expert-parallel 2");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("start moelab under mpirun"), std::string::npos) << r.err;
  const CliRun stray = RunMoelab(kDecode + "--ep-chunks 2");
  EXPECT_EQ(stray.status, 1);
  EXPECT_NE(stray.err.find("--ep-chunks applies with --expert-parallel R only"), std::string::npos)
      << stray.err;
}

}  // namespace
}  // namespace moelab
