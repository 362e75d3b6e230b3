#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace moelab::profiler {

// The timing of one benchmark (one grid point) over its repetitions, in seconds per iteration.
// median/mean/stddev are Google Benchmark's aggregates when it computed them (2+ repetitions in one
// run), else computed here from the repetitions (the profiler's interleaved rounds report one
// repetition per round); min and max always come from the repetitions.
struct Timing {
  int repetitions = 0;     // successful repetitions
  int64_t iterations = 0;  // iterations per repetition
  std::vector<double> repetition_s;
  double median_s = 0;
  double mean_s = 0;
  double stddev_s = 0;
  double min_s = 0;
  double max_s = 0;
  bool failed = false;
  std::string error;  // Google Benchmark's error message when failed
  // User counters (state.counters) by name: each successful repetition's value, in order.
  std::map<std::string, std::vector<double>> counters;
};

// A Google Benchmark reporter that prints nothing and keeps every run, keyed by the name the
// benchmark was registered under (run_name.function_name). Time per iteration is
// real_accumulated_time / iterations: the manual time when the benchmark uses UseManualTime, else
// wall time (UseRealTime). One reporter may serve several RunSpecifiedBenchmarks calls.
class CollectingReporter : public benchmark::BenchmarkReporter {
 public:
  // Called once a benchmark's runs are complete (after its aggregates, or after its single run):
  // name and timing. Used for progress lines.
  using DoneCallback = std::function<void(const std::string& name, const Timing& timing)>;

  CollectingReporter() = default;
  explicit CollectingReporter(DoneCallback on_done) : on_done_(std::move(on_done)) {}

  bool ReportContext(const Context& context) override;
  void ReportRuns(const std::vector<Run>& runs) override;

  // The timing of `name`; a benchmark that never reported comes back failed with "no result".
  Timing Get(const std::string& name) const;
  bool Has(const std::string& name) const { return entries_.count(name) > 0; }

 private:
  struct Entry {
    std::vector<double> repetition_s;
    std::map<std::string, std::vector<double>> counters;
    int64_t iterations = 0;
    int64_t expected_repetitions = 0;
    std::map<std::string, double> aggregates;  // "median", "mean", "stddev"
    bool failed = false;
    std::string error;
  };
  void MaybeDone(const std::string& name);

  std::map<std::string, Entry> entries_;
  DoneCallback on_done_;
};

// Mean and sample standard deviation (n - 1; 0 for one value) of `values` (not empty); the median
// is base::Median (base/stats.h).
double Mean(const std::vector<double>& values);
double SampleStddev(const std::vector<double>& values);

}  // namespace moelab::profiler
