#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <ceres/ceres.h>

#include "fit/fit_options.h"

namespace moelab::fit {

// Multi-start bounded nonlinear least squares over Ceres, shared by every fit in fit/.
//
// A model is a set of named, bounded parameters and one scalar residual per measurement row,
// residual_i = weight_i * (prediction_i(params) - measured_i). Each solve is Ceres' trust region
// (Levenberg-Marquardt, DENSE_QR) with the bounds set by SetParameterLowerBound/UpperBound. The
// solver works on scaled coordinates x = params / scale (scale = |start 0|, so every coordinate is
// O(1) and both the trust region and the covariance's rank test see comparable columns); results
// are always reported in natural units.
//
// Starts: start 0 is the model's centre point, starts 1..N-1 are drawn by the model from a
// StartSampler seeded with FitOptions::seed (same seed, same starts, same fit). Every start is
// clipped into the bounds. The fit kept is the lowest final cost among the starts that converged;
// if none converged the fit is refused with Ceres' termination message.
//
// Standard errors come from ceres::Covariance (DENSE_SVD) at the optimum: sqrt of the diagonal of
// (J^T J)^-1 scaled by the residual variance 2 cost / (n - p). Parameters listed in
// `gauge_fixed` are held at their fitted value (a SubsetManifold) because the data cannot move
// them (e.g. a scale invariance); their std error is reported empty and the others are
// conditional on them. A rank-deficient Jacobian (Ceres' reciprocal condition test fails) or
// n <= p gives empty std errors for every parameter and a status saying why — never a garbage
// number. The covariance ignores bounds: a parameter at its bound (`at_bound`) has a one-sided
// uncertainty that the symmetric std error overstates on the infeasible side.

struct ParameterSpec {
  std::string name;
  double lower = -std::numeric_limits<double>::infinity();
  double upper = std::numeric_limits<double>::infinity();
};

// Deterministic random numbers for start points (mt19937_64 is fully specified by the standard,
// and the conversion to double is done here, so starts do not depend on the standard library).
class StartSampler {
 public:
  explicit StartSampler(uint64_t seed) : engine_(seed) {}
  double Uniform(double low, double high);     // in [low, high)
  double LogUniform(double low, double high);  // log-uniform in [low, high), 0 < low <= high

 private:
  std::mt19937_64 engine_;
};

struct LeastSquaresModel {
  std::string description;  // names the fit in error messages, e.g. "sd fit of runs.csv"
  std::vector<ParameterSpec> parameters;
  std::vector<double> measured;  // one per residual row
  // Ceres cost of `row` on the scaled parameter block (params = scale * x); the caller takes
  // ownership. Build it with MakeScaledRowCost.
  std::function<ceres::CostFunction*(int row, const std::vector<double>& scale)> make_cost;
  // The model's prediction of `row` at natural parameters (same units as `measured`).
  std::function<double(const std::vector<double>& params, int row)> predict;
  // Start `index` in natural units: 0 is the centre, others drawn from `sampler`.
  std::function<std::vector<double>(int index, StartSampler& sampler)> make_start;
  std::vector<int> gauge_fixed;  // parameter indices held fixed by the covariance

  int num_parameters() const { return static_cast<int>(parameters.size()); }
  int num_rows() const { return static_cast<int>(measured.size()); }
};

enum class CovarianceStatus { kOk, kRankDeficient, kNoDegreesOfFreedom, kNotComputed };
std::string ToString(CovarianceStatus status);  // "ok", "rank_deficient", ...

struct LeastSquaresFit {
  std::vector<double> params;          // natural units
  std::vector<double> initial_params;  // the start the kept solve began from (clipped)
  double final_cost = 0;               // Ceres' cost: 1/2 sum of (robustified) residuals^2
  int iterations = 0;                  // of the kept solve
  bool converged = false;
  std::string termination_message;  // Ceres' message for the kept solve
  int best_start = 0;
  int starts_converged = 0;
  std::vector<std::optional<double>> std_errors;  // empty entries: not identifiable here
  CovarianceStatus covariance = CovarianceStatus::kNotComputed;
  std::string covariance_note;
  std::vector<bool> at_bound;  // parameter on a bound (to rounding)
};

// A fresh robust loss for `options` (nullptr for "none"); the ceres::Problem takes ownership.
ceres::LossFunction* MakeLoss(const FitOptions& options);

// The solver settings every fit uses: trust region (Levenberg-Marquardt), DENSE_QR, one thread,
// silent, options.max_iterations, Ceres' default tolerances (function 1e-6, parameter 1e-8,
// gradient 1e-10), initial trust region radius 1e2 (coordinates are O(1)), bisection in the
// projected line search (least_squares.cc says why).
ceres::Solver::Options MakeSolverOptions(const FitOptions& options);

// The scale SolveLeastSquares uses for each parameter: |start 0|, or the finite upper bound, or
// 1 when start 0 is zero.
std::vector<double> SolverScale(const LeastSquaresModel& model, const std::vector<double>& centre);

// One solve from `start` (natural units) over `rows` (all rows when empty), `scale` as above,
// with MakeSolverOptions(options) unless `solver_options` is given (the benchmark driver varies
// tolerances). Never throws for non-convergence: the result says whether it converged.
LeastSquaresFit SolveFromStart(const LeastSquaresModel& model, const FitOptions& options,
                               const std::vector<double>& start, const std::vector<double>& scale,
                               const std::vector<int>& rows = {},
                               const ceres::Solver::Options* solver_options = nullptr);

// The multi-start fit with standard errors. Throws moelab::Error (naming model.description)
// when no start converges or the model is malformed (no rows, start of the wrong size).
LeastSquaresFit SolveLeastSquares(const LeastSquaresModel& model, const FitOptions& options);

// Fills fit.std_errors / covariance / covariance_note at fit.params over all rows.
void ComputeStandardErrors(const LeastSquaresModel& model, const FitOptions& options,
                           LeastSquaresFit& fit);

// Predictions of every row at `params`.
std::vector<double> PredictRows(const LeastSquaresModel& model, const std::vector<double>& params);

// RMSE of held-out predictions (units of `measured`) over CrossValidationFolds (fit/metrics.h):
// each fold is refitted without its points by one solve started at fit.params (the full-data
// optimum: cheap and deterministic), then predicts them. Empty when a training set would have
// fewer rows than parameters.
std::optional<double> CrossValidatedRmse(const LeastSquaresModel& model, const FitOptions& options,
                                         const LeastSquaresFit& fit);

// The same held-out predictions' errors both ways: `rmse` in units of `measured`, and
// `relative_rmse`, the root mean square of (predicted - measured) / measured (the measure the
// relative residuals fit: a curve over decades of time judged on its small values too).
struct CrossValidatedErrors {
  double rmse = 0;
  double relative_rmse = 0;
};
std::optional<CrossValidatedErrors> CrossValidate(const LeastSquaresModel& model,
                                                  const FitOptions& options,
                                                  const LeastSquaresFit& fit);

// ---------------------------------------------------------------------------------------------
// Building residuals. `RowModel` is a copyable functor with
//   template <typename T> T operator()(const T* params) const
// returning the prediction of one row at natural parameters; it is differentiated by
// ceres::AutoDiffCostFunction. residual = weight * (prediction - measured).
template <int kParams, typename RowModel>
class ScaledRowResidual {
 public:
  ScaledRowResidual(RowModel row, double measured, double weight, const std::vector<double>& scale)
      : row_(std::move(row)), measured_(measured), weight_(weight) {
    for (int i = 0; i < kParams; ++i) scale_[i] = scale[static_cast<size_t>(i)];
  }

  template <typename T>
  bool operator()(const T* x, T* residual) const {
    T params[kParams];
    for (int i = 0; i < kParams; ++i) params[i] = x[i] * scale_[i];
    residual[0] = (row_(static_cast<const T*>(params)) - measured_) * weight_;
    return true;
  }

 private:
  RowModel row_;
  double measured_;
  double weight_;
  double scale_[kParams];
};

template <int kParams, typename RowModel>
ceres::CostFunction* MakeScaledRowCost(RowModel row, double measured, double weight,
                                       const std::vector<double>& scale) {
  return new ceres::AutoDiffCostFunction<ScaledRowResidual<kParams, RowModel>, 1, kParams>(
      new ScaledRowResidual<kParams, RowModel>(std::move(row), measured, weight, scale));
}

}  // namespace moelab::fit
