#include "fit/sd_fit.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "fit/least_squares.h"
#include "fit/metrics.h"
#include "base/error.h"

namespace moelab::fit {
namespace {

constexpr int kBias = 0, kK1 = 1, kK2 = 2, kK3 = 3, kDraftBias = 4, kDraftK = 5, kRejectBias = 6,
              kRejectK = 7, kLambda = 8, kGrowth = 9;

// One measurement's predicted speedup, differentiable by Ceres.
struct SdRow {
  model::SdPoint point;
  double ridge_point_tokens;
  model::SdDenominator denominator;

  template <typename T>
  T operator()(const T* params) const {
    return model::EvaluateMoesd<T>(params, point, ridge_point_tokens, denominator).speedup;
  }
};

// Start points. The roofline curve's growth is sampled as its "knee height" q = P ln s
// (G(P) = e^q), since s alone means nothing without P: s = exp(q / (lambda RP)), clipped to
// [1, 2]. The unbounded slopes k1, k3 (target) and draft_k are sized so k * G(P) is a fraction of
// the matching load time. Centre: bounded times at the geometric centre sqrt(5) x their lower
// bound, lambda 0.6, q = 2, slopes at 0.1 x load time / e^q, rejection at 0.1 T_rej (reject_k
// per sequence at B_max).
std::vector<double> SdStart(const SdFitScales& s, const SdBounds& b, int index,
                            StartSampler& sampler) {
  std::vector<double> p(model::MoesdParams::kCount);
  double q = 2.0;
  double slope_fraction = 0.1;
  double target_slope_fraction = 0.1;
  p[kLambda] = 0.6;
  if (index == 0) {
    p[kBias] = std::sqrt(5.0) * s.t_dense_s;
    p[kK2] = std::sqrt(5.0) * s.t_expert_s;
    p[kDraftBias] = std::sqrt(5.0) * s.t_draft_s;
    p[kRejectBias] = 0.1 * s.t_reject_max_s;
    p[kRejectK] = 0.1 * s.t_reject_max_s / static_cast<double>(s.max_batch);
  } else {
    p[kBias] = sampler.Uniform(b.lower[kBias], b.upper[kBias]);
    p[kK2] = sampler.Uniform(b.lower[kK2], b.upper[kK2]);
    p[kDraftBias] = sampler.Uniform(b.lower[kDraftBias], b.upper[kDraftBias]);
    p[kRejectBias] = sampler.Uniform(0, s.t_reject_max_s);
    p[kRejectK] = sampler.Uniform(0, s.t_reject_max_s / static_cast<double>(s.max_batch));
    p[kLambda] = sampler.Uniform(0.2, 1.0);
    q = sampler.Uniform(0.5, 5.0);
    target_slope_fraction = sampler.LogUniform(0.01, 1.0);
    slope_fraction = sampler.LogUniform(0.01, 1.0);
  }
  const double knee = std::exp(q);
  p[kK1] = target_slope_fraction * s.t_dense_s / knee;
  p[kK3] = target_slope_fraction * s.t_dense_s / knee;
  p[kDraftK] = slope_fraction * s.t_draft_s / knee;
  p[kGrowth] = std::clamp(std::exp(q / (p[kLambda] * s.ridge_point_tokens)), 1.0, 2.0);
  return p;
}

}  // namespace

LeastSquaresModel MakeSdLeastSquaresModel(const std::vector<SdMeasurement>& measurements,
                                          const SdFitScales& scales,
                                          model::SdDenominator denominator,
                                          const std::string& origin) {
  const SdBounds bounds = ComputeSdBounds(scales);
  LeastSquaresModel model;
  model.description = "sd fit of " + origin;
  for (int i = 0; i < model::MoesdParams::kCount; ++i) {
    model.parameters.push_back({model::MoesdParams::kNames[static_cast<size_t>(i)],
                                bounds.lower[static_cast<size_t>(i)],
                                bounds.upper[static_cast<size_t>(i)]});
  }
  std::vector<SdRow> rows;
  for (const SdMeasurement& m : measurements) {
    model.measured.push_back(m.speedup);
    rows.push_back({m.point, scales.ridge_point_tokens, denominator});
  }
  model.make_cost = [rows, measured = model.measured](int row, const std::vector<double>& scale) {
    return MakeScaledRowCost<model::MoesdParams::kCount>(
        rows[static_cast<size_t>(row)], measured[static_cast<size_t>(row)], 1.0, scale);
  };
  model.predict = [rows](const std::vector<double>& params, int row) {
    return rows[static_cast<size_t>(row)](params.data());
  };
  model.make_start = [scales, bounds](int index, StartSampler& sampler) {
    return SdStart(scales, bounds, index, sampler);
  };
  // Gauges (fit/sd_fit.h): bias always (scale invariance); reject_bias too when draft_bias and
  // reject_bias enter only as a constant sum of the denominator — always under Algorithm 1, and
  // under Eq. 4 when every point has the same gamma (gamma * draft_bias + reject_bias).
  std::set<int64_t> gammas;
  for (const SdMeasurement& m : measurements) gammas.insert(m.point.gamma);
  model.gauge_fixed = {kBias};
  if (denominator == model::SdDenominator::kAlgorithm1 || gammas.size() < 2) {
    model.gauge_fixed.push_back(kRejectBias);
  }
  return model;
}

SdFit FitSd(const std::vector<SdMeasurement>& measurements, const SdFitScales& scales,
            model::SdDenominator denominator, const FitOptions& options,
            const std::string& origin) {
  options.Validate();
  ValidateSdMeasurementSet(measurements, origin);
  const LeastSquaresModel model =
      MakeSdLeastSquaresModel(measurements, scales, denominator, origin);
  const LeastSquaresFit solution = SolveLeastSquares(model, options);

  SdFit fit;
  fit.denominator = denominator;
  fit.scales = scales;
  fit.bounds = ComputeSdBounds(scales);
  fit.options = options;
  fit.n = static_cast<int64_t>(measurements.size());
  for (int i = 0; i < model::MoesdParams::kCount; ++i) {
    const size_t k = static_cast<size_t>(i);
    fit.params.values[k] = solution.params[k];
    fit.initial_params.values[k] = solution.initial_params[k];
    fit.std_errors[k] = solution.std_errors[k];
    if (solution.at_bound[k]) fit.at_bound.push_back(model::MoesdParams::kNames[k]);
  }
  for (int index : model.gauge_fixed)
    fit.gauge_fixed.push_back(model::MoesdParams::kNames[static_cast<size_t>(index)]);
  fit.covariance_status = ToString(solution.covariance);
  fit.covariance_note = solution.covariance_note;
  fit.final_cost = solution.final_cost;
  fit.iterations = solution.iterations;
  fit.best_start = solution.best_start;
  fit.starts_converged = solution.starts_converged;
  fit.termination_message = solution.termination_message;

  const FitMetrics metrics = ComputeMetrics(model.measured, PredictRows(model, solution.params));
  fit.rmse = metrics.rmse;
  fit.mape = metrics.mape;
  fit.r2 = metrics.r2;
  fit.loo_rmse = CrossValidatedRmse(model, options, solution);
  return fit;
}

SdFitRun RunSdFit(const SdFitRequest& request, const model::PresetStore& store) {
  request.options.Validate();
  SdMeasurementSet set = LoadSdMeasurementFiles(request.measurement_files);
  const model::MoeModelSpec target = store.LoadModel(request.model);
  const model::MoeModelSpec draft = store.LoadModel(request.draft);
  const model::HardwareSpec hardware = store.LoadHardware(request.hardware);
  ValidateSdMeasurementSet(set.measurements, set.origin);
  const SdFitScales scales =
      ComputeSdFitScales(target, draft, hardware, set.measurements, request.max_reject_s);
  return {FitSd(set.measurements, scales, request.denominator, request.options, set.origin),
          set.origin};
}

}  // namespace moelab::fit
