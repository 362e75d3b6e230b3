#include "server/server_metrics.h"

#include <algorithm>
#include <sstream>

namespace moelab::server {
namespace {

std::string Number(double value) {
  std::ostringstream text;
  text.precision(9);
  text << value;
  return text.str();
}

template <typename Number>
void Gauge(std::ostringstream& out, const std::string& name, const std::string& type,
           const std::string& help, Number value) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " " << value << "\n";
}

constexpr RequestOutcome kOutcomes[] = {RequestOutcome::kCompleted, RequestOutcome::kCancelled,
                                        RequestOutcome::kTooLong,   RequestOutcome::kQueueFull,
                                        RequestOutcome::kInvalid,   RequestOutcome::kFailed};

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds_s)
    : bounds_(std::move(upper_bounds_s)), counts_(bounds_.size() + 1, 0) {}

void Histogram::Observe(double seconds) {
  const auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), seconds) - bounds_.begin();
  ++counts_[static_cast<size_t>(bucket)];
  sum_ += seconds;
  ++count_;
}

std::string Histogram::Text(const std::string& name, const std::string& help) const {
  std::ostringstream out;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out << name << "_bucket{le=\"" << Number(bounds_[i]) << "\"} " << cumulative << "\n";
  }
  out << name << "_bucket{le=\"+Inf\"} " << count_ << "\n"
      << name << "_sum " << Number(sum_) << "\n"
      << name << "_count " << count_ << "\n";
  return out.str();
}

std::string OutcomeName(RequestOutcome outcome) {
  switch (outcome) {
    case RequestOutcome::kCompleted:
      return "completed";
    case RequestOutcome::kCancelled:
      return "cancelled";
    case RequestOutcome::kTooLong:
      return "too_long";
    case RequestOutcome::kQueueFull:
      return "queue_full";
    case RequestOutcome::kInvalid:
      return "invalid";
    case RequestOutcome::kFailed:
      return "failed";
  }
  return "unknown";
}

// Buckets from 1 ms to 60 s (TTFT) and 0.1 ms to 10 s (TPOT): CPU decode steps of the tiny test
// shapes take well under a millisecond, a default-shape prefill under load seconds.
ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 60}),
      tpot_({0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
             2.5, 10}) {}

void ServerMetrics::ObserveTimeToFirstToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ttft_.Observe(seconds);
}

void ServerMetrics::ObserveTimePerOutputToken(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  tpot_.Observe(seconds);
}

void ServerMetrics::Count(RequestOutcome outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++outcomes_[outcome];
}

int64_t ServerMetrics::Count(RequestOutcome outcome) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = outcomes_.find(outcome);
  return found == outcomes_.end() ? 0 : found->second;
}

std::string ServerMetrics::Text(const executor::EngineSnapshot& engine) const {
  const scheduler::SchedulerState& s = engine.state;
  std::ostringstream out;
  out.precision(15);  // byte counters beyond 2^24 stay whole
  Gauge(out, "moelab_requests_waiting", "gauge", "Requests waiting to be scheduled.", s.waiting);
  Gauge(out, "moelab_requests_running", "gauge", "Requests running (holding KV blocks).",
        s.running);
  Gauge(out, "moelab_kv_blocks_used", "gauge", "KV-cache blocks in use.", s.kv_blocks_used);
  Gauge(out, "moelab_kv_blocks_total", "gauge", "KV-cache blocks in the budget.",
        s.kv_blocks_total);
  Gauge(out, "moelab_preemptions_total", "counter", "Sequences preempted (recomputed later).",
        s.preemptions);
  Gauge(out, "moelab_iterations_total", "counter", "Engine iterations run.", engine.iterations);
  if (engine.offload) {
    const executor::OffloadCounters& o = *engine.offload;
    Gauge(out, "moelab_offload_expert_activations_total", "counter",
          "Routed experts used (one per layer and iteration whatever its tokens).", o.activations);
    Gauge(out, "moelab_offload_expert_hits_total", "counter",
          "Expert activations whose weights were in memory or on their way.", o.hits);
    Gauge(out, "moelab_offload_demand_fetches_total", "counter",
          "Expert activations that read their weights on demand.", o.demand_fetches);
    Gauge(out, "moelab_offload_prefetches_total", "counter", "Expert reads issued ahead.",
          o.prefetches);
    Gauge(out, "moelab_offload_storage_reads_total", "counter", "Expert reads from storage.",
          o.reads);
    Gauge(out, "moelab_offload_storage_read_bytes_total", "counter",
          "Bytes read from the expert store.", o.storage_read_bytes);
    Gauge(out, "moelab_offload_stall_seconds_total", "counter",
          "Seconds the computation waited for expert reads.", o.stall_s);
    Gauge(out, "moelab_offload_storage_busy_seconds_total", "counter",
          "Seconds with at least one expert read in flight.", o.storage_busy_s);
    Gauge(out, "moelab_offload_copied_bytes_total", "counter",
          "Bytes of the finished reads (initial placement included): over the busy seconds, the "
          "bandwidth the reads got.",
          o.copied_bytes);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  out << ttft_.Text("moelab_time_to_first_token_seconds",
                    "Arrival at the server to the first generated token.")
      << tpot_.Text("moelab_time_per_output_token_seconds",
                    "(last token - first token) / (tokens - 1), per request.");
  out << "# HELP moelab_requests_total Requests by how they ended.\n"
         "# TYPE moelab_requests_total counter\n";
  for (RequestOutcome outcome : kOutcomes) {
    const auto found = outcomes_.find(outcome);
    out << "moelab_requests_total{outcome=\"" << OutcomeName(outcome) << "\"} "
        << (found == outcomes_.end() ? 0 : found->second) << "\n";
  }
  return out.str();
}

}  // namespace moelab::server
