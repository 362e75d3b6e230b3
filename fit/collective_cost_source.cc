#include "fit/collective_cost_source.h"

#include <algorithm>

#include "base/error.h"

namespace moelab::fit {
namespace {

const OperatorCurve* FindCurve(const std::vector<OperatorCurve>& curves, const std::string& op) {
  for (const OperatorCurve& curve : curves) {
    if (curve.op == op && curve.device == "mpi" && curve.variable == "bytes") return &curve;
  }
  return nullptr;
}

int64_t RanksOf(const OperatorCurve& curve, const std::string& origin) {
  if (!curve.shape.contains("ranks") || !curve.shape["ranks"].is_number_integer() ||
      curve.shape["ranks"].get<int64_t>() < 2) {
    throw base::Error(origin + ": the " + curve.op +
                      " curve's shape.ranks must be an integer >= 2 (the ranks it ran on)");
  }
  return curve.shape["ranks"].get<int64_t>();
}

// Why the fit chose this form, for the report.
std::string WhyForm(const OperatorCurve& curve) {
  const LatencyFormFit* linear = curve.Form(LatencyForm::kLinear);
  const LatencyFormFit* interpolated = curve.Form(LatencyForm::kInterpolated);
  if (curve.best == LatencyForm::kLinear) {
    return interpolated == nullptr
               ? "linear: too few sizes to interpolate"
               : "linear: its leave-one-out error is within 1 % of the interpolation's or below";
  }
  if (curve.best == LatencyForm::kInterpolated && linear != nullptr)
    return "interpolated: its leave-one-out error beats the straight line's by more than 1 %";
  return ToString(curve.best) + ": the lowest leave-one-out error of the forms fitted";
}

}  // namespace

FittedCollectiveCost::FittedCollectiveCost(const std::vector<OperatorCurve>& curves,
                                           std::string origin)
    : origin_(std::move(origin)) {
  for (const std::string& op : model::CollectiveOperatorNames()) {
    const OperatorCurve* curve = FindCurve(curves, op);
    if (curve == nullptr) {
      throw base::Error(origin_ + ": no " + op +
                        " curve on device mpi (profile the collectives with mpirun -n R moelab "
                        "profile --collectives, then moelab fit latency)");
    }
    const int64_t ranks = RanksOf(*curve, origin_);
    if (ranks_ != 0 && ranks != ranks_) {
      throw base::Error(origin_ + ": the collective curves measured " + std::to_string(ranks_) +
                        " and " + std::to_string(ranks) + " ranks; one rank count expected");
    }
    ranks_ = ranks;
    curves_.push_back(*curve);
  }
}

const OperatorCurve& FittedCollectiveCost::Curve(const std::string& op,
                                                 const model::CollectiveGroup& group,
                                                 double bytes) const {
  group.Validate();
  if (!(bytes >= 0)) throw base::Error(op + ": bytes must be >= 0");
  if (group.devices != ranks_) {
    throw base::Error(origin_ + ": the collectives were measured on " + std::to_string(ranks_) +
                      " ranks, not the " + std::to_string(group.devices) +
                      " devices this layout's group has (profile them under mpirun -n " +
                      std::to_string(group.devices) + ")");
  }
  for (const OperatorCurve& curve : curves_) {
    if (curve.op == op) return curve;
  }
  throw base::Error(origin_ + ": no " + op + " curve");
}

double FittedCollectiveCost::AllToAllSeconds(double bytes_per_device,
                                             const model::CollectiveGroup& group) const {
  if (group.devices == 1) return 0.0;
  return Curve("all_to_all", group, bytes_per_device).Predict(bytes_per_device);
}

double FittedCollectiveCost::AllReduceSeconds(double bytes,
                                              const model::CollectiveGroup& group) const {
  if (group.devices == 1) return 0.0;
  return Curve("all_reduce", group, bytes).Predict(bytes);
}

double FittedCollectiveCost::ReduceScatterSeconds(double bytes,
                                                  const model::CollectiveGroup& group) const {
  return 0.5 * AllReduceSeconds(bytes, group);
}

double FittedCollectiveCost::AllGatherSeconds(double bytes,
                                              const model::CollectiveGroup& group) const {
  return 0.5 * AllReduceSeconds(bytes, group);
}

nlohmann::json FittedCollectiveCost::Describe() const {
  nlohmann::json curves = nlohmann::json::array();
  for (const OperatorCurve& curve : curves_) {
    const LatencyFormFit& best = curve.Best();
    nlohmann::json entry = {{"operator", curve.op},     {"form", ToString(curve.best)},
                            {"bytes_min", curve.x_min}, {"bytes_max", curve.x_max},
                            {"points", curve.n},        {"why", WhyForm(curve)}};
    entry["loo_rmse_s"] = best.loo_rmse_s ? nlohmann::json(*best.loo_rmse_s) : nullptr;
    if (const LatencyFormFit* linear = curve.Form(LatencyForm::kLinear)) {
      // The straight line's terms, whichever form prices: what a reader compares with a link.
      entry["linear_latency_s"] = linear->params[0];
      entry["linear_bandwidth_bytes_per_s"] =
          linear->params[1] > 0 ? nlohmann::json(1.0 / linear->params[1]) : nullptr;
    }
    curves.push_back(entry);
  }
  return {{"collective_cost", name()}, {"origin", origin_}, {"ranks", ranks_}, {"curves", curves}};
}

bool HasCollectiveCurves(const LatencyFit& fit) {
  for (const std::string& op : model::CollectiveOperatorNames()) {
    if (FindCurve(fit.operators, op) == nullptr) return false;
  }
  return true;
}

Profile CollectiveSamplesOf(const Profile& profile) {
  Profile collectives = profile;
  collectives.samples.clear();
  for (const ProfileSample& sample : profile.samples) {
    if (model::IsCollectiveOperator(sample.op)) collectives.samples.push_back(sample);
  }
  return collectives;
}

}  // namespace moelab::fit
