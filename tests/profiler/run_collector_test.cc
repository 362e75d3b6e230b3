// The reporter that collects Google Benchmark's runs: repetitions, aggregates, errors, and a real
// run through RunSpecifiedBenchmarks.
#include "profiler/run_collector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/stats.h"

namespace moelab::profiler {
namespace {

using BenchmarkRun = benchmark::BenchmarkReporter::Run;

// A repetition as Google Benchmark reports it: accumulated time over `iterations`.
BenchmarkRun Repetition(const std::string& name, int index, int repetitions, double per_iteration_s,
                        int64_t iterations) {
  BenchmarkRun run;
  run.run_name.function_name = name;
  run.run_type = BenchmarkRun::RT_Iteration;
  run.repetition_index = index;
  run.repetitions = repetitions;
  run.iterations = iterations;
  run.real_accumulated_time = per_iteration_s * static_cast<double>(iterations);
  return run;
}

// An aggregate as Google Benchmark 1.7 reports it: the statistic times the iteration count.
BenchmarkRun Aggregate(const std::string& name, const std::string& statistic, int repetitions,
                       double value_s, benchmark::StatisticUnit unit = benchmark::kTime) {
  BenchmarkRun run;
  run.run_name.function_name = name;
  run.run_type = BenchmarkRun::RT_Aggregate;
  run.aggregate_name = statistic;
  run.aggregate_unit = unit;
  run.repetition_index = BenchmarkRun::no_repetition_index;
  run.repetitions = repetitions;
  run.iterations = repetitions;
  run.real_accumulated_time = value_s * repetitions;
  return run;
}

TEST(Statistics, MeanAndSampleStddev) {
  EXPECT_DOUBLE_EQ(Mean({1, 2, 3, 6}), 3);
  EXPECT_DOUBLE_EQ(SampleStddev({2, 4, 4, 4, 5, 5, 7, 9}), std::sqrt(32.0 / 7.0));
  EXPECT_DOUBLE_EQ(SampleStddev({5}), 0);
}

TEST(CollectingReporter, AggregatesFromGoogleBenchmarkMinAndMaxFromRepetitions) {
  int done = 0;
  CollectingReporter reporter([&](const std::string& name, const Timing& timing) {
    ++done;
    EXPECT_EQ(name, "p0000 expert_ffn cpu tokens=4");
    EXPECT_EQ(timing.repetitions, 5);
  });
  const std::string name = "p0000 expert_ffn cpu tokens=4";
  const std::vector<double> times = {3e-3, 1e-3, 4e-3, 1.5e-3, 5e-3};
  std::vector<BenchmarkRun> repetitions;
  for (int i = 0; i < 5; ++i) repetitions.push_back(Repetition(name, i, 5, times[i], 40));
  reporter.ReportRuns(repetitions);
  EXPECT_EQ(done, 0) << "not complete before the aggregates";
  reporter.ReportRuns({Aggregate(name, "mean", 5, Mean(times)),
                       Aggregate(name, "median", 5, base::Median(times)),
                       Aggregate(name, "stddev", 5, SampleStddev(times)),
                       Aggregate(name, "cv", 5, 0.5, benchmark::kPercentage)});
  EXPECT_EQ(done, 1);

  const Timing t = reporter.Get(name);
  EXPECT_FALSE(t.failed);
  EXPECT_EQ(t.repetitions, 5);
  EXPECT_EQ(t.iterations, 40);
  ASSERT_EQ(t.repetition_s.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(t.repetition_s[i], times[i], 1e-15);
  EXPECT_NEAR(t.median_s, 3e-3, 1e-15);
  EXPECT_NEAR(t.mean_s, 2.9e-3, 1e-15);
  EXPECT_NEAR(t.stddev_s, SampleStddev(times), 1e-15);
  EXPECT_NEAR(t.min_s, 1e-3, 1e-15);
  EXPECT_NEAR(t.max_s, 5e-3, 1e-15);
}

TEST(CollectingReporter, AggregatesWinOverItsOwnStatistics) {
  // Google Benchmark's aggregates are what the file reports (here deliberately distinct).
  CollectingReporter reporter;
  reporter.ReportRuns({Repetition("x", 0, 2, 1e-3, 10), Repetition("x", 1, 2, 3e-3, 10)});
  reporter.ReportRuns({Aggregate("x", "median", 2, 2.5e-3), Aggregate("x", "stddev", 2, 7e-4)});
  const Timing t = reporter.Get("x");
  EXPECT_DOUBLE_EQ(t.median_s, 2.5e-3);
  EXPECT_DOUBLE_EQ(t.stddev_s, 7e-4);
  EXPECT_DOUBLE_EQ(t.mean_s, 2e-3);  // no mean aggregate: computed
  EXPECT_DOUBLE_EQ(t.min_s, 1e-3);
  EXPECT_DOUBLE_EQ(t.max_s, 3e-3);
}

TEST(CollectingReporter, OneRepetitionIsCompleteWithoutAggregates) {
  int done = 0;
  CollectingReporter reporter([&](const std::string&, const Timing&) { ++done; });
  reporter.ReportRuns({Repetition("single", 0, 1, 2e-3, 7)});
  EXPECT_EQ(done, 1);
  const Timing t = reporter.Get("single");
  EXPECT_EQ(t.repetitions, 1);
  EXPECT_DOUBLE_EQ(t.median_s, 2e-3);
  EXPECT_DOUBLE_EQ(t.min_s, 2e-3);
  EXPECT_DOUBLE_EQ(t.max_s, 2e-3);
  EXPECT_DOUBLE_EQ(t.stddev_s, 0);
}

TEST(CollectingReporter, ErrorsMarkTheBenchmarkFailed) {
  int done = 0;
  CollectingReporter reporter([&](const std::string&, const Timing& timing) {
    ++done;
    EXPECT_TRUE(timing.failed);
  });
  std::vector<BenchmarkRun> runs;
  for (int i = 0; i < 3; ++i) {
    BenchmarkRun run = Repetition("broken", i, 3, 0, 1);
    run.error_occurred = true;
    run.error_message = "cudaMalloc failed";
    runs.push_back(run);
  }
  reporter.ReportRuns(runs);
  EXPECT_EQ(done, 1);
  const Timing t = reporter.Get("broken");
  EXPECT_TRUE(t.failed);
  EXPECT_EQ(t.error, "cudaMalloc failed");
  EXPECT_EQ(t.repetitions, 0);
  EXPECT_TRUE(reporter.Get("never-ran").failed);
}

TEST(CollectingReporter, CollectsARealGoogleBenchmarkRun) {
  // One iteration per repetition, manual times 1, 2, 3, 1, 2, 3 ms.
  benchmark::ClearRegisteredBenchmarks();
  int calls = 0;
  benchmark::RegisterBenchmark("manual",
                               [&](benchmark::State& state) {
                                 for (auto _ : state)
                                   state.SetIterationTime(1e-3 * (1 + calls++ % 3));
                               })
      ->Repetitions(6)
      ->Iterations(1)
      ->UseManualTime();
  CollectingReporter reporter;
  EXPECT_EQ(benchmark::RunSpecifiedBenchmarks(&reporter, "."), 1u);
  benchmark::ClearRegisteredBenchmarks();
  const Timing t = reporter.Get("manual");
  ASSERT_FALSE(t.failed) << t.error;
  EXPECT_EQ(calls, 6);
  EXPECT_EQ(t.repetitions, 6);
  EXPECT_EQ(t.iterations, 1);
  EXPECT_NEAR(t.median_s, 2e-3, 1e-12);
  EXPECT_NEAR(t.mean_s, 2e-3, 1e-12);
  EXPECT_NEAR(t.stddev_s, std::sqrt(0.8) * 1e-3, 1e-12);
  EXPECT_NEAR(t.min_s, 1e-3, 1e-12);
  EXPECT_NEAR(t.max_s, 3e-3, 1e-12);
}

TEST(CollectingReporter, KeepsEachRepetitionsUserCounters) {
  // A bench's own quantity per repetition (expert_reader's compute_rate): every successful
  // repetition's value in order, across calls (the profiler's rounds); none from aggregates.
  CollectingReporter reporter;
  for (int round = 0; round < 2; ++round) {
    BenchmarkRun run = Repetition("reader", 0, 1, 1e-3, 1);
    run.counters["compute_rate"] = benchmark::Counter(0.5 + 0.25 * round);
    reporter.ReportRuns({run});
  }
  BenchmarkRun aggregate = Aggregate("reader", "median", 2, 1e-3);
  aggregate.counters["compute_rate"] = benchmark::Counter(9);
  reporter.ReportRuns({aggregate});
  const Timing t = reporter.Get("reader");
  ASSERT_EQ(t.counters.count("compute_rate"), 1u);
  EXPECT_EQ(t.counters.at("compute_rate"), (std::vector<double>{0.5, 0.75}));
  EXPECT_TRUE(reporter.Get("never-ran").counters.empty());
}

}  // namespace
}  // namespace moelab::profiler
