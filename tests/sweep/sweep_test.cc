// The sweep engine without the CLI: the grid's order and arguments, the interleaved split, the
// command's CSV read back, outcomes through bytes, and the lowest failed point reported whatever
// the split.
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "base/error.h"
#include "sweep/command_csv.h"
#include "sweep/engine.h"
#include "sweep/spec.h"

namespace moelab::sweep {
namespace {

const std::vector<std::string> kCommands{"plan sd", "sim sd"};
const std::vector<std::string> kReserved{"json", "csv", "out"};

SweepSpec Spec(const std::string& grid) {
  return ParseSweepSpec(R"({"schema": "moelab.sweep_spec/1", "command": "plan sd",
    "options": {"model": "m", "alpha": 0.7, "quiet": true, "loud": false}, "grid": )" +
                            grid + "}",
                        "s.json", kCommands, kReserved);
}

TEST(SweepSpec, PointsInSpecOrderLastOptionFastest) {
  const SweepSpec spec = Spec(R"({"gamma": [1, 2, 4], "batch": ["1-8", 16]})");
  ASSERT_EQ(spec.PointCount(), 6);
  EXPECT_EQ(spec.PointArguments(3),
            std::vector<std::string>(
                {"--model", "m", "--alpha", "0.7", "--quiet", "--gamma", "2", "--batch", "16"}));
  EXPECT_EQ(spec.PointLabel(4), "point 4 (gamma=4, batch=1-8)");
  EXPECT_EQ(spec.PointValues(5).dump(), R"({"gamma":4,"batch":16})");
  EXPECT_EQ(spec.hash.size(), 16u);
  EXPECT_NE(spec.hash, Spec(R"({"gamma": [1, 2, 4], "batch": ["1-8", 17]})").hash);
}

TEST(SweepSpec, RefusesNamingTheField) {
  const auto message = [](const std::string& text) {
    try {
      ParseSweepSpec(text, "s.json", kCommands, kReserved);
    } catch (const base::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = R"({"schema": "moelab.sweep_spec/1", "command": "plan sd", )";
  EXPECT_EQ(message(head + R"("grid": {"batch": [1, [2]]}})"),
            "s.json: grid.batch[1]: expected a string, number or boolean, got array");
  EXPECT_EQ(message(head + R"("grid": {"--batch": [1]}})"),
            "s.json: grid.--batch: an option name without its dashes (\"batch\")");
  EXPECT_EQ(message(head + R"("grid": {"batch": [1]}, "extra": 1})"),
            "s.json: extra: unknown field (expected schema, command, options, grid)");
  EXPECT_NE(message(R"({"schema": "moelab.sweep_spec/2", "command": "plan sd", "grid": {}})")
                .find("s.json: schema: expected"),
            std::string::npos);
  EXPECT_NE(message(head + R"("grid": {"out": ["x"]}})").find("s.json: grid.out: --out"),
            std::string::npos);
}

TEST(SweepEngine, InterleavedSharesCoverEveryPointOnce) {
  EXPECT_EQ(InterleavedPoints(7, 1, 3), std::vector<int64_t>({1, 4}));
  EXPECT_EQ(InterleavedPoints(2, 2, 3), std::vector<int64_t>());
  EXPECT_THROW(InterleavedPoints(7, 3, 3), base::Error);
  EXPECT_THROW(InterleavedPoints(7, -1, 3), base::Error);
}

TEST(SweepEngine, CommandCsvReadBackWithQuotesAndTypes) {
  const CommandCsv csv = ParseCommandCsv("name,speedup,ok,none\n\"a,\"\"b\"\"\",1.5,true,\n");
  ASSERT_EQ(csv.rows.size(), 1u);
  EXPECT_EQ(csv.rows[0][0], "a,\"b\"");
  EXPECT_EQ(csv.row_lines[0], "\"a,\"\"b\"\"\",1.5,true,");
  EXPECT_EQ(CsvText(csv.rows[0][0]), "\"a,\"\"b\"\"\"");
  EXPECT_EQ(CellJson("1.5"), 1.5);
  EXPECT_EQ(CellJson("16"), 16);
  EXPECT_EQ(CellJson("true"), true);
  EXPECT_TRUE(CellJson("").is_null());
  EXPECT_EQ(CellJson("inf"), "inf");
  EXPECT_EQ(CellJson("1e999"), "1e999");
  EXPECT_THROW(ParseCommandCsv("a,b\n1\n"), base::Error);
  EXPECT_THROW(ParseCommandCsv("a,b\n\"1,2\n"), base::Error);
}

TEST(SweepEngine, DropColumnsRebuildsHeaderAndRows) {
  CommandCsv csv = ParseCommandCsv("a,t,\"b,c\"\n1,x,\"y,z\"\n2,w,v\n");
  DropColumns(csv, {"t", "absent"});
  EXPECT_EQ(csv.header_line, "a,\"b,c\"");
  EXPECT_EQ(csv.columns, std::vector<std::string>({"a", "b,c"}));
  EXPECT_EQ(csv.rows[0], std::vector<std::string>({"1", "y,z"}));
  EXPECT_EQ(csv.row_lines, std::vector<std::string>({"1,\"y,z\"", "2,v"}));
  CommandCsv same = ParseCommandCsv("a,b\n1,2\n");
  DropColumns(same, {"c"});
  EXPECT_EQ(same.header_line, "a,b");
  EXPECT_EQ(same.row_lines[0], "1,2");
}

TEST(SweepEngine, LowestFailedPointWinsWhateverTheSplit) {
  const SweepSpec spec = Spec(R"({"batch": [1, 2, 3, 4, 5, 6]})");
  // The command fails at batch 4 and 6: a part stops at its own first failure.
  const PointRunner run = [](const std::vector<std::string>& args) -> std::string {
    const std::string batch = args.back();
    if (batch == "4" || batch == "6") throw base::Error("--batch " + batch + ": too many");
    return "batch,x\n" + batch + ",0.5\n";
  };
  std::vector<std::vector<PointOutcome>> parts;
  for (int part = 0; part < 2; ++part) {
    const std::string bytes =
        EncodeOutcomes(RunPoints(spec, InterleavedPoints(6, part, 2), run, nullptr));
    parts.push_back(DecodeOutcomes(bytes, "s.json"));
  }
  EXPECT_EQ(parts[1].size(), 2u);  // points 1 and 3 (batch 4): stopped there
  try {
    CollectInGridOrder(spec, parts);
    FAIL() << "accepted a failed point";
  } catch (const base::Error& e) {
    EXPECT_STREQ(e.what(), "s.json: point 3 (batch=4): --batch 4: too many");
  }
  const SweepSpec good = Spec(R"({"batch": [1, 2, 3]})");
  const std::vector<PointOutcome> one =
      CollectInGridOrder(good, {RunPoints(good, InterleavedPoints(3, 0, 1), run, nullptr)});
  const std::vector<PointOutcome> split = CollectInGridOrder(
      good, {RunPoints(good, {2}, run, nullptr), RunPoints(good, {0, 1}, run, nullptr)});
  EXPECT_EQ(RenderSweep(good, split, report::Format::kJson),
            RenderSweep(good, one, report::Format::kJson));
  EXPECT_EQ(RenderSweep(good, one, report::Format::kCsv),
            "point,grid.batch,batch,x\n0,1,1,0.5\n1,2,2,0.5\n2,3,3,0.5\n");
  EXPECT_THROW(CollectInGridOrder(good, {RunPoints(good, {0, 1}, run, nullptr)}), base::Error);
}

// Threads take points in whatever order they free up; the outcomes are still those of one
// thread, in order, ending at the first failure in order (a later failure, reached first by
// another thread, does not cut them short), and every point runs once.
TEST(SweepEngine, ThreadsGiveOneThreadsOutcomes) {
  std::string grid = "[";
  for (int b = 1; b <= 64; ++b) grid += (b > 1 ? "," : "") + std::to_string(b);
  const SweepSpec spec = Spec(R"({"batch": )" + grid + "]}");
  std::mutex mutex;
  std::map<std::string, int> runs;
  std::set<std::thread::id> threads_seen;
  const auto runner = [&](std::set<std::string> failing) -> PointRunner {
    return [&, failing](const std::vector<std::string>& args) -> std::string {
      const std::string batch = args.back();
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++runs[batch];
        threads_seen.insert(std::this_thread::get_id());
      }
      // Early points slower, so later ones finish first on other threads.
      std::this_thread::sleep_for(std::chrono::microseconds(std::stoi(batch) < 8 ? 2000 : 50));
      if (failing.count(batch)) throw base::Error("--batch " + batch + ": too many");
      return "batch,x\n" + batch + "," + batch + ".5\n";
    };
  };
  const std::vector<int64_t> points = InterleavedPoints(64, 0, 1);
  const std::vector<PointOutcome> one = RunPoints(spec, points, runner({}), nullptr);
  runs.clear();
  threads_seen.clear();
  int64_t last_done = 0;
  const std::vector<PointOutcome> four = RunPoints(
      spec, points, runner({}),
      [&](int64_t done, int64_t) { last_done = std::max(last_done, done); }, {}, 4);
  EXPECT_GT(threads_seen.size(), 1u);
  EXPECT_EQ(runs.size(), 64u);
  for (const auto& [batch, count] : runs) EXPECT_EQ(count, 1) << "batch " << batch;
  EXPECT_EQ(last_done, 64);
  ASSERT_EQ(four.size(), one.size());
  EXPECT_EQ(RenderSweep(spec, CollectInGridOrder(spec, {four}), report::Format::kJson),
            RenderSweep(spec, CollectInGridOrder(spec, {one}), report::Format::kJson));

  // Failing at batch 40 and 5 (points 39 and 4): both stop at point 4, whichever thread got there.
  const std::vector<PointOutcome> failed_one =
      RunPoints(spec, points, runner({"5", "40"}), nullptr);
  const std::vector<PointOutcome> failed_four =
      RunPoints(spec, points, runner({"5", "40"}), nullptr, {}, 4);
  ASSERT_EQ(failed_four.size(), 5u);
  ASSERT_EQ(failed_one.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(failed_four[i].point, failed_one[i].point);
    EXPECT_EQ(failed_four[i].ok, failed_one[i].ok);
    EXPECT_EQ(failed_four[i].error, failed_one[i].error);
    EXPECT_EQ(failed_four[i].json_rows, failed_one[i].json_rows);
  }
  EXPECT_THROW(RunPoints(spec, points, runner({}), nullptr, {}, 0), base::Error);
}

}  // namespace
}  // namespace moelab::sweep
