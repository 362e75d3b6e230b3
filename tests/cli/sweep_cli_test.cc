// moelab sweep end to end: the rows are the command's own rows point by point, in grid order; the
// same bytes from one process, from mpirun -n 2 and from merged --shard files; bad specs and bad
// points refused with the file, field or point named and no output written. The MPI cases are
// skipped (with a message) in builds without MPI.
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/mpi_runner.h"
#include "tests/support/test_paths.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;
using testing::CliRun;
using testing::RunMoelab;
using testing::Slurp;

const char* kPlanSdSpec = R"({"schema": "moelab.sweep_spec/1", "command": "plan sd",
  "options": {"model": "mixtral-8x7b", "draft": "qwen2-0.5b", "hardware": "2xh100-sxm", "alpha": 0.7},
  "grid": {"batch": [1, 4, 16], "gamma": [1, 2, 4]}})";

class SweepCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::MakeTempDir("sweep-cli"); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
    return (dir_ / name).string();
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(SweepCli, RowsAreTheCommandsRowsPointByPointInGridOrder) {
  const std::string spec = Write("spec.json", kPlanSdSpec);
  const CliRun csv = RunMoelab("sweep " + spec + " --csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  std::string expected;
  int point = 0;
  for (const char* batch : {"1", "4", "16"}) {
    for (const char* gamma : {"1", "2", "4"}) {
      const CliRun one = RunMoelab(
          std::string("plan sd --model mixtral-8x7b --draft qwen2-0.5b --hardware 2xh100-sxm "
                      "--alpha 0.7 --csv --batch ") +
          batch + " --gamma " + gamma);
      ASSERT_EQ(one.status, 0) << one.err;
      const size_t newline = one.out.find('\n');
      if (point == 0) expected = "point,grid.batch,grid.gamma," + one.out.substr(0, newline + 1);
      expected +=
          std::to_string(point++) + "," + batch + "," + gamma + "," + one.out.substr(newline + 1);
    }
  }
  EXPECT_EQ(csv.out, expected);

  const CliRun json = RunMoelab("sweep " + spec + " --json");
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json doc = nlohmann::json::parse(json.out);
  EXPECT_EQ(doc["schema"], "moelab.sweep/1");
  EXPECT_EQ(doc["command"], "plan sd");
  ASSERT_EQ(doc["points"].size(), 9u);
  EXPECT_EQ(doc["points"][5]["grid"], nlohmann::json({{"batch", 4}, {"gamma", 4}}));
  ASSERT_EQ(doc["rows"].size(), 9u);
  EXPECT_EQ(doc["rows"][5]["point"], 5);
  EXPECT_EQ(doc["rows"][5]["batch"], 4);
  EXPECT_EQ(doc["rows"][5]["gamma"], 4);
  EXPECT_GT(doc["rows"][5]["speedup"].get<double>(), 0);
  EXPECT_FALSE(doc["provenance"].contains("time_utc"));
  EXPECT_TRUE(doc["provenance"].contains("git_commit"));
}

// --threads: the points run on that many threads of one process, the output the same bytes as
// one thread's (JSON and CSV), a failing point the same message; a count out of range refused.
TEST_F(SweepCli, ThreadsWriteTheOneThreadBytes) {
  const std::string spec = Write("spec.json", kPlanSdSpec);
  for (const char* format : {"--json", "--csv"}) {
    const CliRun one = RunMoelab("sweep " + spec + " --threads 1 " + format);
    ASSERT_EQ(one.status, 0) << one.err;
    for (const char* threads : {"2", "5", ""}) {  // "": the default (all cores)
      const std::string option = *threads ? std::string(" --threads ") + threads : "";
      const CliRun many = RunMoelab("sweep " + spec + option + " " + format);
      ASSERT_EQ(many.status, 0) << many.err;
      EXPECT_EQ(many.out, one.out) << format << option;
    }
  }
  const std::string failing = Write("failing.json",
                                    R"({"schema": "moelab.sweep_spec/1", "command": "plan sd",
  "options": {"model": "mixtral-8x7b", "draft": "qwen2-0.5b", "hardware": "2xh100-sxm"},
  "grid": {"batch": [1, 2, 3, 0, 5, 6, 7, -1]}})");
  const CliRun one = RunMoelab("sweep " + failing + " --threads 1 --out " + Path("f1.json"));
  const CliRun four = RunMoelab("sweep " + failing + " --threads 4 --out " + Path("f4.json"));
  EXPECT_EQ(one.status, 1);
  EXPECT_EQ(four.status, 1);
  EXPECT_NE(one.err.find("point 3 (batch=0)"), std::string::npos) << one.err;
  EXPECT_EQ(four.err, one.err);
  EXPECT_FALSE(fs::exists(Path("f1.json")));
  EXPECT_FALSE(fs::exists(Path("f4.json")));
  for (const char* bad : {"0", "-2", "1025"}) {
    const CliRun run =
        RunMoelab("sweep " + spec + " --threads=" + bad + " --out " + Path("t.json"));
    EXPECT_EQ(run.status, 1) << bad;
    EXPECT_NE(run.err.find("--threads " + std::string(bad)), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(Path("t.json")));
  }
}

// sim offload's CSV rows print the process's provenance: a sweep leaves out their command line,
// host and time as it does its own, so two runs of one spec (here with different --out paths,
// which the command line held) are the same bytes, and the rest of the provenance stays.
TEST_F(SweepCli, RowsLeaveOutTheProcesssCommandHostAndTime) {
  const std::string spec = Write("offload.json", R"({"schema": "moelab.sweep_spec/1",
  "command": "sim offload", "options": {"model": "mixtral-8x7b", "hardware": "rtx-3090",
  "prompt": 16, "tokens": 4, "accelerator-memory": "24GB", "seed": 1},
  "grid": {"policy": ["resident", "on-demand"]}})");
  for (const char* format : {"--json", "--csv"}) {
    const std::string a = Path(std::string("a") + format), b = Path(std::string("bb") + format);
    ASSERT_EQ(RunMoelab("sweep " + spec + " " + format + " --out " + a).status, 0);
    ASSERT_EQ(RunMoelab("sweep " + spec + " " + format + " --out " + b).status, 0);
    EXPECT_EQ(Slurp(a), Slurp(b)) << format;
    EXPECT_EQ(Slurp(a).find("provenance.command"), std::string::npos) << format;
    EXPECT_EQ(Slurp(a).find("provenance.time_utc"), std::string::npos) << format;
    EXPECT_NE(Slurp(a).find("provenance.git_commit"), std::string::npos) << format;
  }
}

TEST_F(SweepCli, ShardsMergeIntoTheOneProcessBytes) {
  const std::string spec = Write("spec.json", kPlanSdSpec);
  ASSERT_EQ(RunMoelab("sweep " + spec + " --out " + Path("one.json")).status, 0);
  ASSERT_EQ(RunMoelab("sweep " + spec + " --csv --out " + Path("one.csv")).status, 0);
  for (const char* shard : {"0", "1", "2"}) {
    const CliRun run = RunMoelab("sweep " + spec + " --shard " + shard + "/3 --out " +
                                 Path(std::string("shard") + shard + ".json"));
    ASSERT_EQ(run.status, 0) << run.err;
  }
  const nlohmann::json shard1 = nlohmann::json::parse(Slurp(Path("shard1.json")));
  EXPECT_EQ(shard1["schema"], "moelab.sweep_shard/1");
  EXPECT_EQ(shard1["points"], nlohmann::json({1, 4, 7}));
  EXPECT_EQ(shard1["shard"], nlohmann::json({{"index", 1}, {"count", 3}}));
  const std::string shards =
      Path("shard2.json") + " " + Path("shard0.json") + " " + Path("shard1.json");
  ASSERT_EQ(RunMoelab("sweep merge " + shards + " --out " + Path("merged.json")).status, 0);
  EXPECT_EQ(Slurp(Path("merged.json")), Slurp(Path("one.json")));
  ASSERT_EQ(RunMoelab("sweep merge " + shards + " --csv --out " + Path("merged.csv")).status, 0);
  EXPECT_EQ(Slurp(Path("merged.csv")), Slurp(Path("one.csv")));

  // A missing shard, a duplicate, another spec, I >= N: refused, nothing written.
  const struct {
    std::string args, message;
  } bad[] = {
      {Path("shard0.json") + " " + Path("shard1.json"), "shard 2/3 is missing"},
      {shards + " " + Path("shard1.json"), "given twice"},
  };
  for (const auto& c : bad) {
    const CliRun run = RunMoelab("sweep merge " + c.args + " --out " + Path("bad.json"));
    EXPECT_EQ(run.status, 1) << c.args;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(Path("bad.json")));
  }
  std::string other = kPlanSdSpec;
  other.replace(other.find("0.7"), 3, "0.8");
  const std::string other_spec = Write("other.json", other);
  ASSERT_EQ(RunMoelab("sweep " + other_spec + " --shard 2/3 --out " + Path("other2.json")).status,
            0);
  const CliRun mixed = RunMoelab("sweep merge " + Path("shard0.json") + " " + Path("shard1.json") +
                                 " " + Path("other2.json") + " --out " + Path("bad.json"));
  EXPECT_EQ(mixed.status, 1);
  EXPECT_NE(mixed.err.find("a different spec"), std::string::npos) << mixed.err;
  EXPECT_FALSE(fs::exists(Path("bad.json")));
  const CliRun beyond = RunMoelab("sweep " + spec + " --shard 3/3 --out " + Path("bad.json"));
  EXPECT_EQ(beyond.status, 1);
  EXPECT_NE(beyond.err.find("I must be below N"), std::string::npos) << beyond.err;
  EXPECT_FALSE(fs::exists(Path("bad.json")));

  // A damaged or edited shard (its rows, its points list, a field it never has): refused naming
  // the field, never merged into a broken output. A JSON row without its newline once looped
  // until memory ran out.
  const auto damaged = [&](const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json shard = nlohmann::ordered_json::parse(Slurp(Path("shard1.json")));
    edit(shard);
    return Write("damaged1.json", shard.dump(1));
  };
  const auto rows = [](nlohmann::ordered_json& shard, const char* key) -> std::string& {
    return shard["results"][0][key].get_ref<std::string&>();
  };
  const struct {
    std::function<void(nlohmann::ordered_json&)> edit;
    std::string message;
  } edits[] = {
      {[&](auto& s) { rows(s, "json_rows").pop_back(); },
       "results[0].json_rows: expected rows each ending in a newline"},
      {[&](auto& s) { rows(s, "csv_rows").pop_back(); },
       "results[0].csv_rows: expected rows each ending in a newline"},
      {[&](auto& s) { rows(s, "json_rows") += "\n]}\n"; }, "json_rows but"},
      {[&](auto& s) { rows(s, "json_rows").replace(0, 10, "{\"point\":9"); },
       "json_rows line 1: expected an object of point 1"},
      {[](auto& s) {
         s["points"] = {1, 4};
       },
       "points: expected the results' points"},
      {[](auto& s) { s["extra"] = 1; }, "extra: not a field of a sweep shard"},
      // Edits that were merged, and made the output differ from the one-process run's: a result's
      // extra field, a row's extra key, a renamed header column, a grid value retyped.
      {[](auto& s) { s["results"][0]["note"] = "x"; },
       "results[0].note: not a field of a shard's result"},
      {[&](auto& s) { rows(s, "json_rows").replace(0, 11, "{\"point\":1,\"beta\":1,"); },
       "json_rows line 1: beta: not a column of its header"},
      {[&](auto& s) {
         std::string& header = rows(s, "header");
         header.replace(0, header.find(','), "beta");
       },
       "not a column of its header"},
      {[&](auto& s) {
         std::string& json_rows = rows(s, "json_rows");
         json_rows.replace(json_rows.find("\"grid.gamma\":2"), 14, "\"grid.gamma\":\"2\"");
       },
       "json_rows line 1: grid.gamma: expected 2, the spec's value at this point"},
      // A shard written before sweeps dropped the process's columns from sim offload's rows.
      {[&](auto& s) { rows(s, "header") += ",provenance.time_utc"; },
       "results[0].header: provenance.time_utc is the run's, not the point's"},
  };
  for (const auto& c : edits) {
    const CliRun run = RunMoelab("sweep merge " + Path("shard0.json") + " " + damaged(c.edit) +
                                 " " + Path("shard2.json") + " --out " + Path("bad.json"));
    EXPECT_EQ(run.status, 1) << c.message;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(Path("bad.json")));
  }
}

TEST_F(SweepCli, BadSpecsAreRefusedNamingFileAndField) {
  const std::string head = R"({"schema": "moelab.sweep_spec/1", )";
  const struct {
    std::string spec, message;
  } cases[] = {
      {head + R"("command": "run", "grid": {"batch": [1]}})", "not a sweepable prediction command"},
      {head + R"("command": "plan sd", "grid": {}})", "grid: expected a non-empty object"},
      {head + R"("command": "plan sd", "grid": {"batch": []}})", "grid.batch: empty list"},
      // A value twice ran its point twice; 4 and "4" are one value on the command line.
      {head + R"("command": "plan sd", "grid": {"batch": [4, 2, "4"]}})",
       "grid.batch[2]: 4 is listed twice (also grid.batch[0])"},
      {head + R"("command": "plan sd", "grid": {"alpha": [0.5, "0.50"]}})",
       "grid.alpha[1]: 0.50 is listed twice (also grid.alpha[0])"},
      {head + R"("command": "plan sd", "grid": {"context": [0, -0.0]}})",
       "grid.context[1]: -0.0 is listed twice"},
      {head + R"("command": "plan sd", "grid": {"batch": 4}})", "grid.batch: expected a list"},
      {head + R"("command": "plan sd", "options": {"batch": 1}, "grid": {"batch": [1]}})",
       "grid.batch: also in options.batch"},
      {head + R"("command": "plan sd", "options": {"json": true}, "grid": {"batch": [1]}})",
       "options.json: --json picks the output"},
      {head + R"("command": "plan sd", "grid": {"batch": [1], "gamma": [1], "context": [)" +
           [] {
             std::string values;
             for (int i = 0; i < 1001; ++i) {
               if (i) values += ',';  // appended piece by piece: GCC 12's -Wrestrict (bug 105329)
               values += std::to_string(i);
             }
             return values;
           }() +
           R"(], "alpha": [)" +
           [] {
             std::string values;
             // Distinct (a value listed twice is refused first); refused before any point runs.
             for (int i = 0; i < 1000; ++i) values += std::string(i ? "," : "") + std::to_string(i);
             return values;
           }() +
           "]}}",
       "more than 1000000 points"},
      {head + R"("command": "plan sd", "options": {"bogus": 1}, "grid": {"batch": [1]}})",
       "point 0 (batch=1): unrecognised option '--bogus'"},
      {head + R"("command": "plan sd", "grid": {"batch": [1, 0]}})", "point 1 (batch=0): "},
  };
  for (const auto& c : cases) {
    const std::string spec = Write("bad.json", c.spec);
    const CliRun run = RunMoelab("sweep " + spec + " --out " + Path("out.json"));
    EXPECT_EQ(run.status, 1) << c.spec;
    EXPECT_NE(run.err.find(spec), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_FALSE(fs::exists(Path("out.json"))) << c.spec;
  }
}

class SweepOnRanks : public SweepCli {
 protected:
  void SetUp() override {
    if (std::string(MOELAB_MPIEXEC).empty()) GTEST_SKIP() << testing::kNoMpiBuild;
    SweepCli::SetUp();
  }
  CliRun OnRanks(int ranks, const std::string& args) {
    return testing::RunOnRanks(MOELAB_MPIEXEC, MOELAB_BINARY, ranks, args);
  }
};

TEST_F(SweepOnRanks, TwoRanksWriteTheOneProcessBytes) {
  const std::string spec = Write("spec.json", kPlanSdSpec);
  ASSERT_EQ(RunMoelab("sweep " + spec + " --out " + Path("one.json")).status, 0);
  const CliRun two = OnRanks(2, "sweep " + spec + " --out " + Path("two.json"));
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(Slurp(Path("two.json")), Slurp(Path("one.json")));
  // sim sd: several rows per point (one per alpha), three ranks over four points.
  const std::string sim = Write("sim.json", R"({"schema": "moelab.sweep_spec/1",
    "command": "sim sd", "options": {"model": "mixtral-8x7b", "draft": "qwen2-0.5b",
    "hardware": "2xh100-sxm", "alpha": "0.6,0.8"}, "grid": {"gamma": [2, 3], "batch": ["1", "8"]}})");
  ASSERT_EQ(RunMoelab("sweep " + sim + " --csv --out " + Path("one.csv")).status, 0);
  const CliRun three = OnRanks(3, "sweep " + sim + " --csv --out " + Path("three.csv"));
  ASSERT_EQ(three.status, 0) << three.err;
  EXPECT_EQ(Slurp(Path("three.csv")), Slurp(Path("one.csv")));
}

TEST_F(SweepOnRanks, ABadPointFailsEveryRankWithItsMessage) {
  const std::string spec = Write("bad.json", R"({"schema": "moelab.sweep_spec/1",
    "command": "plan sd", "grid": {"batch": [1, 2, 4, 0]}})");
  const CliRun run = OnRanks(2, "sweep " + spec + " --out " + Path("out.json"));
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.err.find("point 3 (batch=0)"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(Path("out.json")));
}

}  // namespace
}  // namespace moelab
