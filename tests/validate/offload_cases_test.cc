// validate --cases offload: the plan, the ranking check, and one run of every case on a tiny
// shape (structure only: times are measured in benchmarks, not in tests).
#include "validate/offload_cases.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "fit/latency_fit.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"
#include "validate/offload_neighbour_reads.h"

namespace moelab::validate {
namespace {

executor::ExecutorConfig Model() {
  executor::ExecutorConfig c = testing::TinyMixtral();
  c.name = "tiny-mixtral-offload-validate";
  c.num_layers = 4;
  c.num_experts = 8;
  c.max_positions = 512;  // prefill 256
  return c;
}

TEST(OffloadCases, EveryPolicyAtThreeBudgetsAndThreeWorkloads) {
  EXPECT_EQ(CaseKindFromString("offload"), CaseKind::kOffload);
  EXPECT_NE(testing::ErrorOf([] {
              CaseKindFromString("offload-prefill");
            }).find("decode, prefill, sd, beam or offload"),
            std::string::npos);
  const std::vector<ValidationCase> cases = OffloadPlan(Model());
  ASSERT_EQ(cases.size(), 5u * 3u * 3u);
  std::set<int64_t> budgets;
  std::set<std::string> policies;
  int decode_1 = 0, decode_4 = 0, prefill = 0;
  for (const ValidationCase& c : cases) {
    budgets.insert(c.expert_slots);
    policies.insert(c.policy);
    if (c.kind == CaseKind::kOffloadPrefill) {
      ++prefill;
      EXPECT_EQ(c.prompt, 256);
      EXPECT_EQ(c.output_tokens, 1);
      EXPECT_EQ(QuantityOf(c.kind), "ttft_s");
    } else {
      ASSERT_EQ(c.kind, CaseKind::kOffload);
      ++(c.batch == 1 ? decode_1 : decode_4);
      EXPECT_GT(c.output_tokens, 1);
      EXPECT_EQ(QuantityOf(c.kind), "tpot_s");
    }
  }
  EXPECT_EQ(budgets, (std::set<int64_t>{8, 16, 24}));  // a quarter, half, three quarters of 32
  EXPECT_EQ(policies, (std::set<std::string>{"on-demand", "lru-prefetch", "static-split", "fmoe",
                                             "stream-all"}));
  EXPECT_EQ(decode_1, 15);
  EXPECT_EQ(decode_4, 15);
  EXPECT_EQ(prefill, 15);
  EXPECT_EQ(cases.front().Label(), "offload on-demand 8 experts B=1");

  executor::ExecutorConfig small = Model();
  small.num_layers = 1;  // 8 experts: no three budgets above one layer's
  EXPECT_NE(testing::ErrorOf([&] { OffloadPlan(small); }).find("too few for three expert budgets"),
            std::string::npos);
}

// The bandwidth a case's neighbours' reads got in the same rounds: their bytes over their busy
// time, pooled per round, the median over rounds; never the case's own.
TEST(OffloadCases, NeighbourBandwidthPoolsTheCasesBesideOneRoundByRound) {
  const auto runs = [](double bytes, double busy_s) {
    return std::vector<RunReads>{{bytes, busy_s}};
  };
  std::vector<std::vector<std::vector<RunReads>>> reads(5);
  for (size_t c = 0; c < reads.size(); ++c) reads[c] = {runs(100, 1), runs(300, 1)};
  reads[2] = {runs(1e9, 1), runs(1e9, 1)};  // the case's own reads count for nothing
  const std::vector<int> one_group(5, 0);
  EXPECT_DOUBLE_EQ(*NeighbourReadBytesPerS(reads, one_group, 2, 2), 200);  // median: 100, 300
  // Pooled, not averaged: 100 B in 1 s and 300 B in 3 s are 100 B/s.
  reads[1][0] = {{100, 1}};
  reads[3][0] = {{300, 3}};
  EXPECT_DOUBLE_EQ(*NeighbourReadBytesPerS(reads, one_group, 2, 1), (100.0 + 300) / 2);
  // At the edges, the neighbours that exist.
  reads[1][0] = {{50, 1}};
  EXPECT_DOUBLE_EQ(*NeighbourReadBytesPerS(reads, one_group, 0, 1), (50.0 + 300) / 2);
  // Only cases of the same group (workload) count: with case 3 in another group, case 2's one
  // neighbour on the right is gone and its left one (50 then 300 B/s) prices it.
  EXPECT_DOUBLE_EQ(*NeighbourReadBytesPerS(reads, {0, 0, 0, 1, 1}, 2, 1), (50.0 + 300) / 2);
  EXPECT_DOUBLE_EQ(*NeighbourReadBytesPerS(reads, {0, 0, 0, 1, 1}, 4, 2), 200);  // case 3: 100, 300
  // Runs without a busy time (a tier that does not measure it) are left out; none at all: nullopt.
  std::vector<std::vector<std::vector<RunReads>>> idle(3, {runs(100, 0)});
  EXPECT_FALSE(NeighbourReadBytesPerS(idle, {0, 0, 0}, 1, 1).has_value());
  EXPECT_THROW(NeighbourReadBytesPerS(idle, {0, 0, 0}, 3, 1), base::Error);
}

// validate runs the offload rounds between the profile's: the steps one at a time, judged once
// the rounds are in, refused before any.
// The tiny model's offload cases, priced by a stored quick profile's fit.
class OffloadValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    request_.work_dir = testing::MakeTempDir("moelab-validate-offload");
    request_.threads = 2;
  }
  void TearDown() override { std::filesystem::remove_all(request_.work_dir); }

  const fit::Profile profile_ =
      fit::LoadProfile(testing::TestDataDir() / "profiles/quick-cpu.json");
  const fit::LatencyFit fit_ = fit::FitLatency(profile_, fit::FitOptions{});
  ValidationRequest request_;
};

TEST_F(OffloadValidationTest, RoundsRunOneAtATimeAndAreJudgedAfter) {
  OffloadValidation validation(request_, Model(), [](const std::string&) {});
  ValidationResult early;
  EXPECT_THROW(validation.Judge(profile_, fit_, early), base::Error);
  validation.RunRound();
  validation.RunRound();
  ValidationResult result;
  validation.Judge(profile_, fit_, result);
  ASSERT_EQ(result.cases.size(), 45u);
  for (const CaseResult& r : result.cases)
    EXPECT_EQ(r.repeats, r.spec.kind == CaseKind::kOffloadPrefill ? 6 : 2) << r.spec.Label();
}

// --timelines: each case's last executor run and its simulation, side by side, with the same op
// names and passes from 0; the engines decide alike, so both read the same experts.
TEST_F(OffloadValidationTest, TimelinesShowEachCaseOnBothEngines) {
  ValidationRequest request = request_;
  request.repeat = 1;
  request.timelines = true;
  ValidationResult result;
  RunOffloadValidation(
      request, Model(), profile_, fit_, [](const std::string&) {}, result);
  ASSERT_EQ(result.cases.size(), 45u);
  const auto storage_reads = [](const std::filesystem::path& file) {
    std::ifstream in(file);
    const nlohmann::json trace = nlohmann::json::parse(in);
    int64_t reads = 0, passes = 0;
    for (const nlohmann::json& e : trace["traceEvents"]) {
      if (e["ph"] != "X") continue;
      const int64_t pass = e["args"]["pass"];
      if (e["cat"] == "storage" && pass >= 0) ++reads;  // -1: the executor's initial placement
      passes = std::max(passes, pass + 1);
    }
    return std::pair{reads, passes};
  };
  for (const CaseResult& r : result.cases) {
    std::string name = r.spec.Label();
    std::replace_if(
        name.begin(), name.end(),
        [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '-');
    const std::filesystem::path dir = request.work_dir / "timelines";
    const auto [executed, executed_passes] = storage_reads(dir / (name + ".executor.json"));
    const auto [simulated, simulated_passes] = storage_reads(dir / (name + ".sim.json"));
    ASSERT_TRUE(r.offload.has_value()) << name;
    EXPECT_EQ(executed, r.offload->measured_reads) << name;
    EXPECT_EQ(simulated, r.offload->predicted_reads) << name;
    EXPECT_EQ(executed_passes, simulated_passes) << name;
    EXPECT_EQ(executed_passes, r.spec.kind == CaseKind::kOffloadPrefill ? 1 : r.spec.output_tokens)
        << name;
  }
  // Each workload's all-in-RAM baseline too: no read on either engine.
  for (const std::string name :
       {"offload-static-split-32-experts-B-1", "offload-static-split-32-experts-B-4",
        "offload-prefill-static-split-32-experts-prompt-256"}) {
    const std::filesystem::path dir = request.work_dir / "timelines";
    EXPECT_EQ(storage_reads(dir / ("baseline-" + name + ".executor.json")).first, 0) << name;
    EXPECT_EQ(storage_reads(dir / ("baseline-" + name + ".sim.json")).first, 0) << name;
  }
}

TEST_F(OffloadValidationTest, EveryCaseRunsOnBothEngines) {
  const std::filesystem::path dir = request_.work_dir;
  const fit::Profile& profile = profile_;
  const fit::LatencyFit& fit = fit_;
  ValidationRequest request = request_;
  request.repeat = 1;
  ValidationResult result;
  RunOffloadValidation(
      request, Model(), profile, fit, [](const std::string&) {}, result);
  ASSERT_EQ(result.cases.size(), 45u);
  for (const CaseResult& r : result.cases) {
    EXPECT_TRUE(std::isfinite(r.predicted) && r.predicted > 0) << r.spec.Label();
    EXPECT_GT(r.measured, 0) << r.spec.Label();
    // A prefill is one short step: it runs three times a round.
    EXPECT_EQ(r.repeats, r.spec.kind == CaseKind::kOffloadPrefill ? 3 : 1) << r.spec.Label();
    EXPECT_EQ(r.cost_source, "fitted-profile");
    EXPECT_EQ(r.routing.rfind("trace:", 0), 0u);
    // Both engines decide alike, so they read the same experts; the run's time holds the case's.
    ASSERT_TRUE(r.offload.has_value()) << r.spec.Label();
    EXPECT_EQ(r.offload->predicted_reads, r.offload->measured_reads) << r.spec.Label();
    EXPECT_GT(r.offload->measured_reads, 0) << r.spec.Label();
    EXPECT_GE(r.offload->measured_total_s, r.measured) << r.spec.Label();
    EXPECT_GE(r.offload->predicted_total_s, r.predicted) << r.spec.Label();
    EXPECT_GT(r.offload->predicted_storage_busy_s, 0) << r.spec.Label();
    EXPECT_GE(r.offload->measured_stall_s, 0) << r.spec.Label();
    // What the neighbouring cases' reads got (the storage tier times its reads), and the
    // prediction at it beside the probes'.
    ASSERT_TRUE(r.offload->neighbour_read_bytes_per_s.has_value()) << r.spec.Label();
    EXPECT_GT(*r.offload->neighbour_read_bytes_per_s, 0) << r.spec.Label();
    ASSERT_TRUE(r.offload->predicted_with_neighbours.has_value()) << r.spec.Label();
    EXPECT_GT(*r.offload->predicted_with_neighbours, 0) << r.spec.Label();
    EXPECT_GT(r.offload->predicted_from_profile, 0) << r.spec.Label();
    // A decode's steps on both engines, step by step; they add up to the case's time.
    const std::vector<double>& predicted = r.offload->predicted_decode_steps_s;
    const std::vector<double>& measured = r.offload->measured_decode_steps_s;
    if (r.spec.kind == CaseKind::kOffloadPrefill) {
      EXPECT_TRUE(predicted.empty() && measured.empty()) << r.spec.Label();
      continue;
    }
    ASSERT_EQ(measured.size(), static_cast<size_t>(r.spec.output_tokens - 1)) << r.spec.Label();
    ASSERT_EQ(predicted.size(), measured.size()) << r.spec.Label();
    double predicted_sum = 0, measured_sum = 0;
    for (size_t i = 0; i < measured.size(); ++i) {
      predicted_sum += predicted[i];
      measured_sum += measured[i];
    }
    const double steps = static_cast<double>(measured.size());
    EXPECT_NEAR(predicted_sum / steps, r.predicted, 1e-9 * r.predicted) << r.spec.Label();
    // (One run here: its TPOT is its decode's wall time, the steps plus the runner's gaps.)
    EXPECT_NEAR(measured_sum / steps, r.measured, 0.02 * r.measured) << r.spec.Label();
  }
  EXPECT_NE(std::find_if(result.notes.begin(), result.notes.end(),
                         [](const std::string& note) {
                           return note.rfind(
                                      "offload: the reads of the 2 cases of the same "
                                      "workload before and after each case got",
                                      0) == 0;
                         }),
            result.notes.end());
  // The computation's rate beside the reader's probes: measured (and then the errors without the
  // coupling beside it), or a note that no probe pass outlasted two of its steps.
  const auto starting = [&](const std::string& prefix) {
    return std::count_if(result.notes.begin(), result.notes.end(),
                         [&](const std::string& note) { return note.rfind(prefix, 0) == 0; });
  };
  const auto measured_rate = starting("offload: the computation beside the reader (");
  EXPECT_EQ(measured_rate + starting("offload: the computation's rate beside the reader was not "
                                     "measured"),
            1);
  EXPECT_EQ(starting("offload: with the computation at its full rate while reads are in flight"),
            measured_rate);
  // Beside the cases, per workload, the run with every routed expert in RAM and its prediction:
  // the computation the cases add reads to (its runs read nothing, or validate stops).
  for (const std::string workload : {"decode B=1", "decode B=4", "prefill 256"}) {
    const auto baseline =
        std::find_if(result.notes.begin(), result.notes.end(), [&](const std::string& note) {
          return note.rfind("offload baseline, " + workload + ": every routed expert in RAM (",
                            0) == 0;
        });
    ASSERT_NE(baseline, result.notes.end()) << workload;
    EXPECT_NE(baseline->find(workload == "prefill 256" ? "ttft_s measured" : "tpot_s measured"),
              std::string::npos)
        << *baseline;
    // The prediction beside it: a positive time and the signed error.
    const size_t predicted = baseline->find("), predicted ");
    ASSERT_NE(predicted, std::string::npos) << *baseline;
    EXPECT_GT(std::stod(baseline->substr(predicted + 13)), 0) << *baseline;
    EXPECT_NE(baseline->find(" s, signed error "), std::string::npos) << *baseline;
    // One round of repeat 1: a prefill runs three times a round, a decode once.
    EXPECT_NE(baseline->find(workload == "prefill 256" ? ", 3 runs)" : ", 1 run)"),
              std::string::npos)
        << *baseline;
  }
  // One ranking line per (workload, budget), the count, the resolved pairs (and a note when
  // O_DIRECT fell back).
  int64_t rankings = 0;
  for (const std::string& note : result.notes) rankings += note.rfind("offload ranking, ", 0) == 0;
  EXPECT_EQ(rankings, 9);
  ASSERT_GE(result.notes.size(), 3u);
  EXPECT_NE(result.notes[result.notes.size() - 3].find("of 9 (workload, expert budget) pairs"),
            std::string::npos);
  EXPECT_NE(result.notes[result.notes.size() - 2].find("(min-max ranges apart): "),
            std::string::npos);
  EXPECT_NE(result.notes.back().find("sign test p < 0.05): "), std::string::npos)
      << result.notes.back();
  EXPECT_NE(result.notes.back().find("of 90; the prediction orders"), std::string::npos)
      << result.notes.back();
  // The same in validation.json's offload_ranking; a decode ran once, so no halves to compare.
  ASSERT_TRUE(result.offload_ranking.has_value());
  EXPECT_EQ(result.offload_ranking->budgets.size(), 9u);
  EXPECT_EQ(result.offload_ranking->pairs, 90);
  EXPECT_FALSE(result.offload_ranking->halves.has_value());
  // Each case's runs, in the order they ran, for the paired comparison of its policies.
  for (const CaseResult& r : result.cases) {
    if (r.spec.kind != CaseKind::kOffload && r.spec.kind != CaseKind::kOffloadPrefill) continue;
    EXPECT_EQ(r.measured_runs.size(), static_cast<size_t>(RunsPerRound(r.spec.kind)))
        << r.spec.Label();
    EXPECT_EQ(*std::min_element(r.measured_runs.begin(), r.measured_runs.end()), r.measured_min);
  }
  // The simulator's read bandwidths: the executor's reader over one pass, alone and beside
  // computation, in pairs (four before the round, two after each of its 45 cases), both positive.
  const auto reader = std::find_if(result.notes.begin(), result.notes.end(), [](const auto& note) {
    return note.rfind("offload: storage read bandwidth, the executor's reader (", 0) == 0;
  });
  ASSERT_NE(reader, result.notes.end());
  EXPECT_NE(reader->find("(2 reads in flight sharing it;"), std::string::npos) << *reader;
  EXPECT_NE(reader->find(" in 94 interleaved pairs "), std::string::npos) << *reader;
  const size_t alone = reader->find(": alone "), beside = reader->find("beside computation ");
  ASSERT_NE(alone, std::string::npos) << *reader;
  ASSERT_NE(beside, std::string::npos) << *reader;
  EXPECT_GT(std::stod(reader->substr(alone + 8)), 0) << *reader;
  EXPECT_GT(std::stod(reader->substr(beside + 19)), 0) << *reader;
  EXPECT_NE(reader->find("the simulator reads at the second while the host computes"),
            std::string::npos)
      << *reader;
  // The plain loop's probe, before and after the round, is reported beside it, and what pricing
  // with it alone would have given.
  const auto probe = std::find_if(result.notes.begin(), result.notes.end(), [](const auto& note) {
    return note.rfind("offload: plain probe (two threads each calling ExpertStore::Read", 0) == 0;
  });
  ASSERT_NE(probe, result.notes.end());
  EXPECT_NE(probe->find("median of 2"), std::string::npos) << *probe;
  EXPECT_NE(probe->find("reported, not used"), std::string::npos) << *probe;
  EXPECT_NE(std::find_if(result.notes.begin(), result.notes.end(),
                         [](const auto& note) {
                           return note.rfind("offload: priced as before 2026-11-29", 0) == 0;
                         }),
            result.notes.end());
  // What the profile path alone gives (hw from-profile): this stored profile predates
  // expert_reader, so its reads are priced at storage_read's single stream, and the note says so.
  const auto from_profile =
      std::find_if(result.notes.begin(), result.notes.end(), [](const auto& note) {
        return note.rfind("offload: priced from the profile alone (", 0) == 0;
      });
  ASSERT_NE(from_profile, result.notes.end());
  EXPECT_NE(from_profile->find("no expert_reader sample at 2 reads in flight"), std::string::npos)
      << *from_profile;
  EXPECT_NE(from_profile->find("the median abs error is "), std::string::npos) << *from_profile;
  // Beside it, the disk alone at one and two reads in flight, once before the round: two positive
  // bandwidths and their ratio.
  const auto bare = std::find_if(result.notes.begin(), result.notes.end(), [](const auto& note) {
    return note.rfind("offload: the disk by reads in flight (bare O_DIRECT preads", 0) == 0;
  });
  ASSERT_NE(bare, result.notes.end());
  EXPECT_NE(bare->find("median of 1): 1 in flight "), std::string::npos) << *bare;
  const size_t one = bare->find("1 in flight "), two = bare->find("2 in flight ");
  ASSERT_NE(two, std::string::npos) << *bare;
  EXPECT_GT(std::stod(bare->substr(one + 12)), 0) << *bare;
  EXPECT_GT(std::stod(bare->substr(two + 12)), 0) << *bare;
  EXPECT_NE(bare->find(" MB/s (x"), std::string::npos) << *bare;
  EXPECT_TRUE(std::filesystem::exists(dir / "offload-store"));
}

}  // namespace
}  // namespace moelab::validate
