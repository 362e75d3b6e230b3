#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fit/fit_options.h"
#include "fit/sd_bounds.h"
#include "fit/sd_measurements.h"
#include "model/moesd_speedup.h"
#include "model/preset_store.h"

namespace moelab::fit {

struct LeastSquaresModel;  // fit/least_squares.h (Ceres); only the benchmark driver needs it

// A fitted MoESD speedup model (formulas.md section 1; model/moesd_speedup.h).
//
// The fit minimises sum_i (EvaluateMoesd(params, point_i, RP, denominator).speedup -
// measured_i)^2 within SdBounds (fit/sd_bounds.h), multi-start (fit/least_squares.h).
//
// Invariances the data cannot resolve, and what the std errors mean because of them:
//  - Scale: the speedup is a ratio of times that are all linear in the eight time parameters
//    (bias, k1, k2, k3, draft_bias, draft_k, reject_bias, reject_k), so multiplying all eight by
//    any c > 0 leaves every prediction unchanged. The data fix their ratios, lambda and s; the
//    common scale is set only by the bounds (and, within them, by the start).
//  - draft_bias vs reject_bias: under Algorithm 1's denominator (draft + ar + verify + reject)
//    both are constants of the denominator only, so only draft_bias + reject_bias is determined.
//    Under Eq. 4 (gamma draft + verify + reject) gamma separates them, if gamma varies.
// Standard errors are therefore computed with `bias` (and, in the second case, `reject_bias`)
// held at the fitted value (gauge_fixed): those have a null std error; each other time
// parameter's std error is that of its ratio to bias, times bias, and draft_bias's is that of
// draft_bias + reject_bias. fit/README.md has the derivation.
struct SdFit {
  model::MoesdParams params;
  std::array<std::optional<double>, model::MoesdParams::kCount> std_errors{};
  std::string covariance_status = "not_computed";  // ok | rank_deficient | no_degrees_of_freedom
  std::string covariance_note;
  std::vector<std::string> gauge_fixed;  // parameter names held fixed for the std errors
  std::vector<std::string> at_bound;     // parameter names on a bound at the optimum

  double rmse = 0;  // speedup units
  double mape = 0;  // percent
  std::optional<double> r2;
  std::optional<double> loo_rmse;  // speedup units; leave-one-out for n <= 60, else 5-fold
  int64_t n = 0;

  model::SdDenominator denominator = model::SdDenominator::kAlgorithm1;
  SdFitScales scales;  // model, draft, hardware, time scales and the ridge point
  SdBounds bounds;

  // How the solve went.
  model::MoesdParams initial_params;  // start of the kept solve
  double final_cost = 0;              // 1/2 sum of squared (robustified) residuals
  int iterations = 0;
  int best_start = 0;
  int starts_converged = 0;
  std::string termination_message;
  FitOptions options;

  double ridge_point_tokens() const { return scales.ridge_point_tokens; }
};

// Fits the model. `origin` names the measurements in messages. Refuses (moelab::Error, before any
// solve) what ValidateSdMeasurementSet refuses, and afterwards a solve that converges from no
// start (with Ceres' termination message).
SdFit FitSd(const std::vector<SdMeasurement>& measurements, const SdFitScales& scales,
            model::SdDenominator denominator, const FitOptions& options, const std::string& origin);

// The least-squares problem FitSd solves (same residuals, bounds, starts and scaling), for the
// benchmark against scipy. Start 0 (the centre) is documented in fit/README.md.
LeastSquaresModel MakeSdLeastSquaresModel(const std::vector<SdMeasurement>& measurements,
                                          const SdFitScales& scales,
                                          model::SdDenominator denominator,
                                          const std::string& origin);

// `moelab fit sd`: the measurement files (combined, LoadSdMeasurementFiles), the target, draft and
// hardware whose specs bound the fit (presets or paths), and how to fit. `options` are validated.
struct SdFitRequest {
  std::vector<std::string> measurement_files;
  std::string model, draft, hardware;
  model::SdDenominator denominator = model::SdDenominator::kAlgorithm1;
  std::optional<double> max_reject_s;  // T_rej; default derived from the hardware (sd_bounds.h)
  FitOptions options;
};
struct SdFitRun {
  SdFit fit;
  std::string origin;  // the files, "a.csv + b.csv"
};
SdFitRun RunSdFit(const SdFitRequest& request, const model::PresetStore& store);

}  // namespace moelab::fit
