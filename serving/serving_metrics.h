#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::serving {

// What happened to one request, measured by a load generator or simulated: times in seconds from
// the start of the run.
struct RequestOutcome {
  int64_t id = 0;
  double arrival_s = 0;      // when it was sent
  double first_token_s = 0;  // when its first generated token arrived (streamed)
  double finish_s = 0;       // when its last token arrived
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;          // generated tokens received
  std::vector<double> token_times_s;  // every token's arrival (for ITL), may be empty
  bool failed = false;
  std::string error;  // why it failed: "http 503: queue full", "connection refused", ...
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0, mean = 0;  // base/stats.h's Quantile; 0 when no sample
  int64_t count = 0;
};

struct ServiceLevelObjectives {
  std::optional<double> ttft_s, tpot_s;  // goodput counts requests meeting every SLO given
};

// The report of a serving run, measured (moelab loadgen) or predicted (moelab sim serve), in one
// schema (`moelab.serving/1`) so the two diff field by field.
struct ServingSummary {
  Percentiles ttft_s;     // first token - arrival
  Percentiles tpot_s;     // (finish - first token) / (output tokens - 1), requests with >= 2 tokens
  Percentiles itl_s;      // gaps between consecutive tokens, over all requests
  Percentiles e2e_s;      // finish - arrival
  double duration_s = 0;  // first arrival to last finish
  double throughput_tokens_per_s = 0;  // output tokens of completed requests / duration
  double requests_per_s = 0;           // completed / duration
  double goodput_requests_per_s = 0;   // completed meeting every SLO / duration
  int64_t completed = 0, failed = 0;
  std::vector<std::pair<std::string, int64_t>> failures;  // error -> count, most frequent first
};

ServingSummary Summarize(const std::vector<RequestOutcome>& outcomes,
                         const ServiceLevelObjectives& slo);

// {"schema": "moelab.serving/1", "ttft_s": {"p50","p90","p99","mean","count"}, "tpot_s", "itl_s",
// "e2e_s", "throughput_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "completed",
// "failed", "failures", "duration_s"}; the caller adds "load", "slo", "scheduler", "source", ...
nlohmann::json ServingSummaryToJson(const ServingSummary& summary);
// One CSV row of the same scalars (header first), the percentiles as ttft_s_p50, ...
std::string ServingSummaryCsv(const ServingSummary& summary);

}  // namespace moelab::serving
