#include "profiler/run_collector.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/stats.h"

namespace moelab::profiler {

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double SampleStddev(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double mean = Mean(values);
  double sum = 0;
  for (double v : values) sum += (v - mean) * (v - mean);
  return std::sqrt(sum / static_cast<double>(values.size() - 1));
}

bool CollectingReporter::ReportContext(const Context& /*context*/) { return true; }

void CollectingReporter::ReportRuns(const std::vector<Run>& runs) {
  std::set<std::string> touched;
  std::set<std::string> aggregated;
  for (const Run& run : runs) {
    const std::string& name = run.run_name.function_name;
    Entry& entry = entries_[name];
    touched.insert(name);
    entry.expected_repetitions = std::max<int64_t>(entry.expected_repetitions, run.repetitions);
    const double per_iteration_s =
        run.iterations > 0 ? run.real_accumulated_time / static_cast<double>(run.iterations)
                           : run.real_accumulated_time;
    if (run.run_type == Run::RT_Aggregate) {
      // mean, median and stddev are in seconds per iteration; cv (a ratio) and any user
      // statistics are not needed.
      if (run.aggregate_unit == benchmark::kTime)
        entry.aggregates[run.aggregate_name] = per_iteration_s;
      aggregated.insert(name);
      continue;
    }
    if (run.error_occurred) {
      entry.failed = true;
      if (entry.error.empty()) entry.error = run.error_message;
      entry.repetition_s.push_back(std::nan(""));
      continue;
    }
    entry.iterations = run.iterations;
    entry.repetition_s.push_back(per_iteration_s);
    for (const auto& [counter, value] : run.counters)
      entry.counters[counter].push_back(value.value);
  }
  for (const std::string& name : touched) {
    const Entry& entry = entries_[name];
    const int64_t reported = static_cast<int64_t>(entry.repetition_s.size());
    int64_t successes = 0;
    for (double s : entry.repetition_s) successes += !std::isnan(s);
    // Google Benchmark sends aggregates only with two or more successful repetitions.
    const bool complete =
        aggregated.count(name) > 0 || (reported >= entry.expected_repetitions && successes < 2);
    if (complete) MaybeDone(name);
  }
}

void CollectingReporter::MaybeDone(const std::string& name) {
  if (on_done_) on_done_(name, Get(name));
}

Timing CollectingReporter::Get(const std::string& name) const {
  Timing timing;
  const auto found = entries_.find(name);
  if (found == entries_.end()) {
    timing.failed = true;
    timing.error = "no result";
    return timing;
  }
  const Entry& entry = found->second;
  for (double s : entry.repetition_s) {
    if (!std::isnan(s)) timing.repetition_s.push_back(s);
  }
  timing.failed = entry.failed || timing.repetition_s.empty();
  timing.error =
      entry.failed ? entry.error : (timing.repetition_s.empty() ? "no successful repetition" : "");
  timing.iterations = entry.iterations;
  timing.counters = entry.counters;
  timing.repetitions = static_cast<int>(timing.repetition_s.size());
  if (timing.repetition_s.empty()) return timing;
  timing.min_s = *std::min_element(timing.repetition_s.begin(), timing.repetition_s.end());
  timing.max_s = *std::max_element(timing.repetition_s.begin(), timing.repetition_s.end());
  auto aggregate = [&](const char* key, double fallback) {
    const auto it = entry.aggregates.find(key);
    return it != entry.aggregates.end() ? it->second : fallback;
  };
  timing.median_s = aggregate("median", base::Median(timing.repetition_s));
  timing.mean_s = aggregate("mean", Mean(timing.repetition_s));
  timing.stddev_s = aggregate("stddev", SampleStddev(timing.repetition_s));
  return timing;
}

}  // namespace moelab::profiler
