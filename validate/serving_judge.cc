#include "validate/serving_judge.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/stats.h"
#include "report/format.h"

namespace moelab::validate {

const std::vector<std::string>& ServingMetricNames() {
  static const std::vector<std::string> names = {
      "ttft_p50_s",    "ttft_p90_s", "tpot_p50_s", "tpot_p90_s", "throughput_tokens_per_s",
      "requests_per_s"};
  return names;
}

double ServingMetric(const serving::ServingSummary& summary, const std::string& name) {
  if (name == "ttft_p50_s") return summary.ttft_s.p50;
  if (name == "ttft_p90_s") return summary.ttft_s.p90;
  if (name == "tpot_p50_s") return summary.tpot_s.p50;
  if (name == "tpot_p90_s") return summary.tpot_s.p90;
  if (name == "throughput_tokens_per_s") return summary.throughput_tokens_per_s;
  if (name == "requests_per_s") return summary.requests_per_s;
  throw base::Error("serving metric '" + name + "': not one validate judges");
}

double ServingRelativeError(double predicted, double measured, const std::string& what) {
  if (!(measured > 0) || !std::isfinite(measured) || !std::isfinite(predicted)) {
    throw base::Error(what + ": measured " + report::FormatNumber(measured, 6) + ", predicted " +
                      report::FormatNumber(predicted, 6) +
                      ": a relative error needs a positive, finite measurement");
  }
  return std::abs(predicted - measured) / measured;
}

double RelativeSpread(const std::vector<double>& values) {
  if (values.empty()) return 0;
  const double median = base::Median(values);
  if (!(median > 0)) return 0;
  const auto [low, high] = std::minmax_element(values.begin(), values.end());
  return (*high - *low) / median;
}

std::optional<double> CrossingRate(const std::vector<double>& rates,
                                   const std::vector<double>& values, double threshold) {
  if (rates.size() != values.size())
    throw base::Error("crossing rate: " + std::to_string(rates.size()) + " rates but " +
                      std::to_string(values.size()) + " values");
  for (size_t i = 1; i < rates.size(); ++i) {
    if (!(rates[i] > rates[i - 1])) throw base::Error("crossing rate: rates not ascending");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < threshold) continue;
    if (i == 0) return std::nullopt;  // below the lowest rate: nothing to interpolate from
    const double share = (threshold - values[i - 1]) / (values[i] - values[i - 1]);
    return rates[i - 1] + share * (rates[i] - rates[i - 1]);
  }
  return std::nullopt;
}

std::optional<double> QueueingFormCrossing(const std::array<double, 3>& rates,
                                           const std::array<double, 3>& values, double threshold) {
  const auto [r0, r1, r2] = rates;
  const auto [v0, v1, v2] = values;
  if (!(r1 > r0 && r2 > r1)) throw base::Error("queueing-form crossing: rates not ascending");
  if (!(v1 > v0 && v2 > v1) || !(threshold >= v0)) return std::nullopt;
  // (v1 - v0) / (v2 - v1) = (r1 - r0)(c - r2) / ((r2 - r1)(c - r0)), linear in c.
  const double q = (v1 - v0) * (r2 - r1) / ((v2 - v1) * (r1 - r0));
  if (!(q < 1)) return std::nullopt;  // not convex: a straight line or bending down
  const double c = (r2 - q * r0) / (1 - q);
  const double b = (v1 - v0) * (c - r1) * (c - r0) / (r1 - r0);
  const double a = v0 - b / (c - r0);
  const double rate = c - b / (threshold - a);
  if (!std::isfinite(rate)) return std::nullopt;
  return rate;
}

Saturation SaturationOf(const serving::ServingSummary& overloaded) {
  return {overloaded.requests_per_s, overloaded.throughput_tokens_per_s};
}

double AllDecodingTokensPerS(const std::vector<serving::RequestOutcome>& outcomes) {
  double start = -std::numeric_limits<double>::infinity();
  double end = std::numeric_limits<double>::infinity();
  for (const serving::RequestOutcome& outcome : outcomes) {
    if (outcome.failed || outcome.token_times_s.empty())
      throw base::Error("serving overhead: request " + std::to_string(outcome.id) +
                        " has no token times (" + outcome.error + ")");
    start = std::max(start, outcome.token_times_s.front());
    end = std::min(end, outcome.token_times_s.back());
  }
  if (!(end > start))
    throw base::Error(
        "serving overhead: no span in which every request decoded (raise the "
        "output tokens)");
  int64_t tokens = 0;
  for (const serving::RequestOutcome& outcome : outcomes) {
    for (double t : outcome.token_times_s) tokens += (t > start && t <= end) ? 1 : 0;
  }
  return static_cast<double>(tokens) / (end - start);
}

nlohmann::json ServingTarget::ToJson() const {
  nlohmann::json json = {
      {"name", name}, {"limit", limit}, {"at_least", at_least}, {"pass", pass()}};
  json["value"] = value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  if (!value) json["why_missing"] = why_missing;
  return json;
}

}  // namespace moelab::validate
