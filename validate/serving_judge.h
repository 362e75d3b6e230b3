#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serving/serving_metrics.h"

namespace moelab::validate {

// The arithmetic of `validate --cases serving` (validate/README.md, "--cases serving"), apart from
// any run so it can be checked by hand.

// The metrics judged per arrival rate, in the order reported: p50/p90 TTFT, p50/p90 TPOT,
// throughput in output tokens/s and in completed requests/s.
const std::vector<std::string>& ServingMetricNames();
// `name`'s value in a summary (Error for an unknown name).
double ServingMetric(const serving::ServingSummary& summary, const std::string& name);

// |predicted - measured| / measured; Error when measured is not positive (a relative error of a
// zero measurement says nothing).
double ServingRelativeError(double predicted, double measured, const std::string& what);

// (max - min) / median of repeated measurements: their spread, beside an error.
double RelativeSpread(const std::vector<double>& values);

// The arrival rate at which `values` (a quantity rising with the rate, e.g. p99 TTFT, measured or
// predicted at `rates`, ascending) first reaches `threshold`, linearly interpolated between the
// two rates around it. nullopt when no value reaches it (the crossing lies beyond the highest
// rate) or the first already does (it lies below the lowest): neither is interpolated. Error when
// the rates are not strictly ascending or the sizes differ.
std::optional<double> CrossingRate(const std::vector<double>& rates,
                                   const std::vector<double>& values, double threshold);

// The rate where a + b / (c - rate) -- a queue's waiting time below its saturation c -- through
// three points (rates ascending, values rising and convex) reaches `threshold`: a crossing read
// off a coarse grid without the chord's bias (a chord over a convex curve reaches a threshold
// early). nullopt when the three points are not rising and strictly convex (no such form passes
// through them) or the threshold is below the first value (not extrapolated downwards). Error
// when the rates are not strictly ascending.
std::optional<double> QueueingFormCrossing(const std::array<double, 3>& rates,
                                           const std::array<double, 3>& values, double threshold);

// A summary's throughput when every request arrives at once: completed requests (and their output
// tokens) over the span from the first arrival to the last finish, i.e. Summarize's
// requests_per_s and throughput_tokens_per_s. Named for what the judge calls it.
struct Saturation {
  double requests_per_s = 0, tokens_per_s = 0;
};
Saturation SaturationOf(const serving::ServingSummary& overloaded);

// The decode tokens/s of a batch served together, from each request's token arrival times: over
// the window in which every request is decoding (from the last first token to the first finish),
// the tokens that arrived inside it over its length. Error when the window is empty (some request
// finished before another's first token: the batch never decoded together).
double AllDecodingTokensPerS(const std::vector<serving::RequestOutcome>& outcomes);

// One target of issue 38: `value` against `limit` (value <= limit passes, or >= with at_least);
// value absent (e.g. no measured crossing) fails with `why_missing`.
struct ServingTarget {
  std::string name;
  std::optional<double> value;
  double limit = 0;
  bool at_least = false;
  std::string why_missing;
  bool pass() const { return value && (at_least ? *value >= limit : *value <= limit); }
  nlohmann::json ToJson() const;
};

}  // namespace moelab::validate
