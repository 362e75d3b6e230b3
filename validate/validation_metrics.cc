#include "validate/validation_metrics.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "base/error.h"

namespace moelab::validate {

std::optional<std::vector<double>> StepMedians(
    const std::vector<std::vector<double>>& steps_per_run) {
  if (steps_per_run.empty() || steps_per_run.front().empty()) return std::nullopt;
  const size_t steps = steps_per_run.front().size();
  for (const std::vector<double>& run : steps_per_run) {
    if (run.size() != steps) return std::nullopt;
  }
  std::vector<double> medians, step(steps_per_run.size());
  for (size_t i = 0; i < steps; ++i) {
    for (size_t r = 0; r < steps_per_run.size(); ++r) step[r] = steps_per_run[r][i];
    medians.push_back(Quantile(step, 0.5));
  }
  return medians;
}

std::optional<double> SumOfStepMedians(const std::vector<std::vector<double>>& steps_per_run) {
  const std::optional<std::vector<double>> medians = StepMedians(steps_per_run);
  if (!medians) return std::nullopt;
  double sum = 0;
  for (double m : *medians) sum += m;
  return sum;
}

std::optional<std::vector<std::vector<double>>> AtReferenceSpeed(
    const std::vector<std::vector<double>>& steps_per_run,
    const std::vector<std::vector<double>>& reference_per_run,
    const std::vector<double>& pooled_reference_medians) {
  if (steps_per_run.size() != reference_per_run.size() || pooled_reference_medians.empty())
    return std::nullopt;
  std::vector<std::vector<double>> scaled = steps_per_run;
  for (size_t r = 0; r < scaled.size(); ++r) {
    const std::vector<double>& reference = reference_per_run[r];
    if (reference.size() != pooled_reference_medians.size()) return std::nullopt;
    std::vector<double> ratios;
    for (size_t i = 0; i < reference.size(); ++i) {
      if (!(pooled_reference_medians[i] > 0)) return std::nullopt;
      ratios.push_back(reference[i] / pooled_reference_medians[i]);
    }
    const double speed = Median(ratios);
    if (!(speed > 0)) return std::nullopt;
    for (double& step : scaled[r]) step /= speed;
  }
  return scaled;
}

double PairedSignTestP(const std::vector<double>& a, const std::vector<double>& b) {
  int64_t a_faster = 0, b_faster = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    a_faster += a[i] < b[i];
    b_faster += b[i] < a[i];
  }
  const int64_t n = a_faster + b_faster;
  if (n == 0) return 1.0;
  // P(X <= min(a_faster, b_faster)) for X ~ Binomial(n, 1/2), doubled.
  const int64_t fewer = std::min(a_faster, b_faster);
  double term = std::pow(0.5, static_cast<double>(n));  // C(n, 0) / 2^n
  double tail = 0;
  for (int64_t k = 0; k <= fewer; ++k) {
    tail += term;
    term *= static_cast<double>(n - k) / static_cast<double>(k + 1);
  }
  return std::min(1.0, 2.0 * tail);
}

double AbsError(double predicted, double measured) {
  if (!std::isfinite(predicted) || !std::isfinite(measured) || !(measured > 0)) {
    throw base::Error("a relative error needs a finite prediction and a positive measurement");
  }
  return std::fabs(predicted - measured) / measured;
}

std::string RoutingAssumed(const CaseResult& result) {
  if (!result.routing_assumed.empty()) return result.routing_assumed;
  return result.routing == "uniform" ? kUniformRouting : kMeasuredRouting;
}

std::vector<ErrorSummary> Summarize(const std::vector<CaseResult>& results) {
  // (source, routing) groups in order of first appearance; within each, "overall" then kinds.
  std::vector<std::pair<std::string, std::string>> groups;
  using Scope = std::tuple<std::string, std::string, std::string>;
  std::map<Scope, std::vector<double>> errors, spreads;
  std::map<Scope, int64_t> within;
  std::vector<std::string> kinds;
  for (const CaseResult& r : results) {
    const std::pair<std::string, std::string> group{r.cost_source, RoutingAssumed(r)};
    if (std::find(groups.begin(), groups.end(), group) == groups.end()) groups.push_back(group);
    const std::string kind = ToString(r.spec.kind);
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
    const double spread = (r.measured_max - r.measured_min) / r.measured;
    const bool inside = r.predicted >= r.measured_min && r.predicted <= r.measured_max;
    for (const std::string& scope : {kind, std::string("overall")}) {
      const Scope key{group.first, group.second, scope};
      errors[key].push_back(r.abs_error);
      spreads[key].push_back(spread);
      within[key] += inside ? 1 : 0;
    }
  }
  std::vector<ErrorSummary> summaries;
  for (const auto& [source, routing] : groups) {
    std::vector<std::string> scopes = {"overall"};
    scopes.insert(scopes.end(), kinds.begin(), kinds.end());
    for (const std::string& scope : scopes) {
      const auto it = errors.find({source, routing, scope});
      if (it == errors.end()) continue;
      const std::vector<double>& e = it->second;
      const Scope key{source, routing, scope};
      summaries.push_back({scope, source, routing, static_cast<int64_t>(e.size()), Quantile(e, 0.5),
                           Quantile(e, 0.9), *std::max_element(e.begin(), e.end()),
                           Quantile(spreads[key], 0.5), within[key]});
    }
  }
  return summaries;
}

std::vector<BestGammaRow> BestGamma(const std::vector<CaseResult>& results) {
  using Key = std::tuple<std::string, std::string, bool, int64_t>;  // source, routing, shape, batch
  std::vector<Key> order;
  std::map<Key, std::vector<const CaseResult*>> rows;
  for (const CaseResult& r : results) {
    if (r.spec.kind != CaseKind::kSd) continue;
    const Key key{r.cost_source, RoutingAssumed(r), r.spec.held_out_shape, r.spec.batch};
    if (!rows.count(key)) order.push_back(key);
    rows[key].push_back(&r);
  }
  std::vector<BestGammaRow> best;
  for (const Key& key : order) {
    const std::vector<const CaseResult*>& at_batch = rows[key];
    if (at_batch.size() < 2) continue;  // one gamma: nothing to choose
    const CaseResult* predicted = at_batch.front();
    const CaseResult* measured = at_batch.front();
    for (const CaseResult* r : at_batch) {
      if (r->predicted > predicted->predicted) predicted = r;
      if (r->measured > measured->measured) measured = r;
    }
    best.push_back({std::get<3>(key), std::get<2>(key), std::get<0>(key), std::get<1>(key),
                    predicted->spec.gamma, measured->spec.gamma, predicted->predicted,
                    measured->measured, 1.0 - predicted->measured / measured->measured});
  }
  return best;
}

}  // namespace moelab::validate
