#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "executor/serving_engine.h"

namespace moelab::server {

// A Prometheus histogram: cumulative counts per upper bound (seconds), +Inf, sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds_s);
  void Observe(double seconds);
  // "# HELP", "# TYPE NAME histogram", NAME_bucket{le="..."}, NAME_sum, NAME_count.
  std::string Text(const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; one more for +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// How a request ended, the `outcome` label of moelab_requests_total.
enum class RequestOutcome { kCompleted, kCancelled, kTooLong, kQueueFull, kInvalid, kFailed };
std::string OutcomeName(RequestOutcome outcome);  // "completed", "cancelled", "too_long", ...

// What /metrics reports beside the engine's counters: latency histograms measured by the server
// (TTFT from the request's arrival at the server to its first token leaving the engine, TPOT
// between its first and last token over the tokens after the first) and requests by outcome.
// Thread-safe.
class ServerMetrics {
 public:
  ServerMetrics();
  void ObserveTimeToFirstToken(double seconds);
  void ObserveTimePerOutputToken(double seconds);
  void Count(RequestOutcome outcome);
  int64_t Count(RequestOutcome outcome) const;
  // Prometheus text exposition (version 0.0.4) with the engine's gauges: moelab_requests_waiting,
  // moelab_requests_running, moelab_kv_blocks_used, moelab_kv_blocks_total,
  // moelab_preemptions_total, moelab_iterations_total, the two histograms and
  // moelab_requests_total{outcome=...}.
  std::string Text(const executor::EngineSnapshot& engine) const;

 private:
  mutable std::mutex mutex_;
  Histogram ttft_, tpot_;
  std::map<RequestOutcome, int64_t> outcomes_;
};

}  // namespace moelab::server
