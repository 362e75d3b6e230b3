// Summarize and the moelab.serving/1 printers (serving_metrics.h).
#include "serving/serving_metrics.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <type_traits>
#include <optional>

#include "base/stats.h"

namespace moelab::serving {
namespace {

Percentiles Of(const std::vector<double>& samples) {
  Percentiles result;
  result.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return result;
  result.p50 = base::Quantile(samples, 0.5);
  result.p90 = base::Quantile(samples, 0.9);
  result.p99 = base::Quantile(samples, 0.99);
  double sum = 0;
  for (double sample : samples) sum += sample;
  result.mean = sum / static_cast<double>(samples.size());
  return result;
}

// TPOT of a completed request with at least two tokens: the decode time per token after the first.
std::optional<double> Tpot(const RequestOutcome& outcome) {
  if (outcome.output_tokens < 2) return std::nullopt;
  return (outcome.finish_s - outcome.first_token_s) /
         static_cast<double>(outcome.output_tokens - 1);
}

// A request with one token has no TPOT and so meets a TPOT SLO (it waits for no second token).
bool MeetsSlo(const RequestOutcome& outcome, const ServiceLevelObjectives& slo) {
  if (slo.ttft_s && outcome.first_token_s - outcome.arrival_s > *slo.ttft_s) return false;
  const std::optional<double> tpot = Tpot(outcome);
  return !(slo.tpot_s && tpot && *tpot > *slo.tpot_s);
}

std::vector<std::pair<std::string, int64_t>> FailuresByCount(
    const std::vector<RequestOutcome>& outcomes) {
  std::map<std::string, int64_t> counts;
  for (const RequestOutcome& outcome : outcomes)
    if (outcome.failed) ++counts[outcome.error];
  std::vector<std::pair<std::string, int64_t>> failures(counts.begin(), counts.end());
  // Most frequent first; ties by error text, so the order is the same on every run.
  std::stable_sort(failures.begin(), failures.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return failures;
}

// No sample (nothing completed, or no request had a second token): null, not a latency of 0 s
// that reads as an instant answer.
nlohmann::json PercentilesJson(const Percentiles& p) {
  if (p.count == 0) {
    return {{"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}, {"mean", nullptr}, {"count", 0}};
  }
  return {{"p50", p.p50}, {"p90", p.p90}, {"p99", p.p99}, {"mean", p.mean}, {"count", p.count}};
}

}  // namespace

ServingSummary Summarize(const std::vector<RequestOutcome>& outcomes,
                         const ServiceLevelObjectives& slo) {
  ServingSummary summary;
  std::vector<double> ttft, tpot, itl, e2e;
  double first_arrival_s = std::numeric_limits<double>::infinity(), last_finish_s = 0;
  int64_t output_tokens = 0, meeting_slo = 0;
  for (const RequestOutcome& outcome : outcomes) {
    first_arrival_s = std::min(first_arrival_s, outcome.arrival_s);
    last_finish_s = std::max({last_finish_s, outcome.finish_s, outcome.arrival_s});
    if (outcome.failed) {
      ++summary.failed;
      continue;
    }
    ++summary.completed;
    output_tokens += outcome.output_tokens;
    ttft.push_back(outcome.first_token_s - outcome.arrival_s);
    e2e.push_back(outcome.finish_s - outcome.arrival_s);
    if (const std::optional<double> request_tpot = Tpot(outcome)) tpot.push_back(*request_tpot);
    for (size_t i = 1; i < outcome.token_times_s.size(); ++i)
      itl.push_back(outcome.token_times_s[i] - outcome.token_times_s[i - 1]);
    if (MeetsSlo(outcome, slo)) ++meeting_slo;
  }
  summary.ttft_s = Of(ttft);
  summary.tpot_s = Of(tpot);
  summary.itl_s = Of(itl);
  summary.e2e_s = Of(e2e);
  summary.failures = FailuresByCount(outcomes);
  if (outcomes.empty()) return summary;
  summary.duration_s = last_finish_s - first_arrival_s;
  if (summary.duration_s > 0) {
    summary.throughput_tokens_per_s = static_cast<double>(output_tokens) / summary.duration_s;
    summary.requests_per_s = static_cast<double>(summary.completed) / summary.duration_s;
    summary.goodput_requests_per_s = static_cast<double>(meeting_slo) / summary.duration_s;
  }
  return summary;
}

nlohmann::json ServingSummaryToJson(const ServingSummary& summary) {
  nlohmann::json failures = nlohmann::json::array();
  for (const auto& [error, count] : summary.failures)
    failures.push_back({{"error", error}, {"count", count}});
  return {{"schema", "moelab.serving/1"},
          {"ttft_s", PercentilesJson(summary.ttft_s)},
          {"tpot_s", PercentilesJson(summary.tpot_s)},
          {"itl_s", PercentilesJson(summary.itl_s)},
          {"e2e_s", PercentilesJson(summary.e2e_s)},
          {"throughput_tokens_per_s", summary.throughput_tokens_per_s},
          {"requests_per_s", summary.requests_per_s},
          {"goodput_requests_per_s", summary.goodput_requests_per_s},
          {"completed", summary.completed},
          {"failed", summary.failed},
          {"failures", failures},
          {"duration_s", summary.duration_s}};
}

std::string ServingSummaryCsv(const ServingSummary& summary) {
  std::string header, row;
  auto add = [&](const std::string& name, auto value) {
    if (!header.empty()) {
      header += ',';
      row += ',';
    }
    header += name;
    if constexpr (std::is_same_v<decltype(value), std::optional<double>>) {
      if (!value) return;  // no sample: an empty field, as the JSON's null
      char digits[32];
      row.append(digits, std::to_chars(digits, digits + sizeof digits, *value).ptr);
    } else {
      char digits[32];  // the shortest text that reads back to the same double (as the JSON's)
      row.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
    }
  };
  const std::pair<const char*, const Percentiles*> sets[] = {{"ttft_s", &summary.ttft_s},
                                                             {"tpot_s", &summary.tpot_s},
                                                             {"itl_s", &summary.itl_s},
                                                             {"e2e_s", &summary.e2e_s}};
  for (const auto& [name, p] : sets) {
    const std::string prefix = name;
    auto sampled = [&](double value) {
      return p->count > 0 ? std::optional<double>(value) : std::nullopt;
    };
    add(prefix + "_p50", sampled(p->p50));
    add(prefix + "_p90", sampled(p->p90));
    add(prefix + "_p99", sampled(p->p99));
    add(prefix + "_mean", sampled(p->mean));
    add(prefix + "_count", p->count);
  }
  add("throughput_tokens_per_s", summary.throughput_tokens_per_s);
  add("requests_per_s", summary.requests_per_s);
  add("goodput_requests_per_s", summary.goodput_requests_per_s);
  add("completed", summary.completed);
  add("failed", summary.failed);
  add("duration_s", summary.duration_s);
  return header + "\n" + row + "\n";
}

}  // namespace moelab::serving
