#include "fit/least_squares.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <sstream>

#include <glog/logging.h>

#include "fit/metrics.h"
#include "base/error.h"

namespace moelab::fit {
namespace {

// Convergence tolerances of every solve: Ceres' defaults. Tighter ones were measured to do
// worse on the MoESD fit (fit/README.md): where k1 -> 0 trades against s (k1 s^P), a start
// crawls along the valley until the iteration cap, and a worse local minimum that did converge
// wins; at these tolerances all 120 planted fits reached a cost below the planted truth's.
constexpr double kFunctionTolerance = 1e-6;
constexpr double kParameterTolerance = 1e-8;
constexpr double kGradientTolerance = 1e-10;
// The solver's coordinates are O(1) by construction (x = params / scale), so Ceres' default
// initial trust region radius (1e4, meant for unscaled problems) only buys rejected steps; and a
// step leaving the box triggers Ceres' line search along the projected path, where bisection
// needs no gradient evaluations (cubic interpolation does). Measured on the MoESD fit
// (fit/README.md): half the iterations, the same optima on all 120 planted fits; radii from 1e2
// to 1e3 behave alike.
constexpr double kInitialTrustRegionRadius = 1e2;
constexpr double kAtBoundRelative = 1e-9;
constexpr int kMaxActiveSetRounds = 8;

// Ceres logs through glog (e.g. a rank-deficient covariance as an ERROR line). fit/ turns every
// such condition into its own status and message, so those lines would only be noise on the
// CLI's stderr: unless the host program initialised glog itself, messages below FATAL are dropped.
void QuietCeresLogging() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!google::IsGoogleLoggingInitialized()) FLAGS_minloglevel = google::GLOG_FATAL;
  });
}

std::vector<int> AllRows(const LeastSquaresModel& model) {
  std::vector<int> rows(static_cast<size_t>(model.num_rows()));
  for (int i = 0; i < model.num_rows(); ++i) rows[static_cast<size_t>(i)] = i;
  return rows;
}

void CheckModel(const LeastSquaresModel& model) {
  if (model.parameters.empty())
    throw base::Error(model.description + ": the model has no parameters");
  if (model.measured.empty()) throw base::Error(model.description + ": no measurements to fit");
  if (!model.make_cost || !model.predict || !model.make_start) {
    throw base::Error(model.description + ": incomplete least-squares model (internal)");
  }
  for (int index : model.gauge_fixed) {
    if (index < 0 || index >= model.num_parameters()) {
      throw base::Error(model.description + ": gauge parameter index out of range (internal)");
    }
  }
}

std::vector<double> ClipToBounds(const LeastSquaresModel& model, std::vector<double> point) {
  if (static_cast<int>(point.size()) != model.num_parameters()) {
    throw base::Error(model.description + ": start point has " + std::to_string(point.size()) +
                      " values for " + std::to_string(model.num_parameters()) +
                      " parameters (internal)");
  }
  for (size_t i = 0; i < point.size(); ++i) {
    point[i] = std::clamp(point[i], model.parameters[i].lower, model.parameters[i].upper);
  }
  return point;
}

// Builds the problem on `x` (scaled coordinates) over `rows`.
void BuildProblem(const LeastSquaresModel& model, const FitOptions& options,
                  const std::vector<double>& scale, const std::vector<int>& rows, double* x,
                  ceres::Problem& problem, bool set_bounds) {
  ceres::LossFunction* loss = MakeLoss(options);
  for (int row : rows) problem.AddResidualBlock(model.make_cost(row, scale), loss, x);
  if (!set_bounds) return;
  for (int i = 0; i < model.num_parameters(); ++i) {
    const ParameterSpec& spec = model.parameters[static_cast<size_t>(i)];
    if (std::isfinite(spec.lower))
      problem.SetParameterLowerBound(x, i, spec.lower / scale[static_cast<size_t>(i)]);
    if (std::isfinite(spec.upper))
      problem.SetParameterUpperBound(x, i, spec.upper / scale[static_cast<size_t>(i)]);
  }
}

std::vector<bool> AtBound(const LeastSquaresModel& model, const std::vector<double>& params) {
  std::vector<bool> at_bound(params.size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParameterSpec& spec = model.parameters[i];
    for (double bound : {spec.lower, spec.upper}) {
      if (!std::isfinite(bound)) continue;
      // Ceres projects onto the (scaled) bound, so a bound parameter equals it to rounding.
      const double tolerance = kAtBoundRelative * std::max(std::fabs(bound), std::fabs(params[i]));
      if (std::fabs(params[i] - bound) <= tolerance) at_bound[i] = true;
    }
  }
  return at_bound;
}

}  // namespace

std::string ToString(CovarianceStatus status) {
  switch (status) {
    case CovarianceStatus::kOk:
      return "ok";
    case CovarianceStatus::kRankDeficient:
      return "rank_deficient";
    case CovarianceStatus::kNoDegreesOfFreedom:
      return "no_degrees_of_freedom";
    case CovarianceStatus::kNotComputed:
      return "not_computed";
  }
  return "not_computed";
}

double StartSampler::Uniform(double low, double high) {
  // 53 random bits -> [0, 1).
  const double unit = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
  return low + (high - low) * unit;
}

double StartSampler::LogUniform(double low, double high) {
  if (!(low > 0 && high >= low)) throw base::Error("LogUniform needs 0 < low <= high (internal)");
  return std::exp(Uniform(std::log(low), std::log(high)));
}

ceres::LossFunction* MakeLoss(const FitOptions& options) {
  if (options.loss == "huber") return new ceres::HuberLoss(options.loss_scale);
  if (options.loss == "cauchy") return new ceres::CauchyLoss(options.loss_scale);
  return nullptr;
}

ceres::Solver::Options MakeSolverOptions(const FitOptions& options) {
  ceres::Solver::Options solver;
  solver.minimizer_type = ceres::TRUST_REGION;
  solver.trust_region_strategy_type = ceres::LEVENBERG_MARQUARDT;
  solver.linear_solver_type = ceres::DENSE_QR;
  solver.max_num_iterations = options.max_iterations;
  solver.function_tolerance = kFunctionTolerance;
  solver.parameter_tolerance = kParameterTolerance;
  solver.gradient_tolerance = kGradientTolerance;
  solver.initial_trust_region_radius = kInitialTrustRegionRadius;
  solver.line_search_interpolation_type = ceres::BISECTION;
  solver.num_threads = 1;
  solver.logging_type = ceres::SILENT;
  solver.minimizer_progress_to_stdout = false;
  return solver;
}

std::vector<double> SolverScale(const LeastSquaresModel& model, const std::vector<double>& centre) {
  std::vector<double> scale(centre.size(), 1.0);
  for (size_t i = 0; i < centre.size(); ++i) {
    const double upper = model.parameters[i].upper;
    if (std::fabs(centre[i]) > 0) {
      scale[i] = std::fabs(centre[i]);
    } else if (std::isfinite(upper) && upper > 0) {
      scale[i] = upper;
    }
  }
  return scale;
}

LeastSquaresFit SolveFromStart(const LeastSquaresModel& model, const FitOptions& options,
                               const std::vector<double>& start, const std::vector<double>& scale,
                               const std::vector<int>& rows,
                               const ceres::Solver::Options* solver_options) {
  QuietCeresLogging();
  const std::vector<double> clipped = ClipToBounds(model, start);
  const std::vector<int> used_rows = rows.empty() ? AllRows(model) : rows;
  const ceres::Solver::Options solver =
      solver_options ? *solver_options : MakeSolverOptions(options);
  const int p = model.num_parameters();
  std::vector<double> x(clipped.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = clipped[i] / scale[i];

  // Active-set refinement. Ceres handles bounds by projecting each trust-region step onto the
  // box; with a parameter on its bound the projected steps can stall and report CONVERGENCE
  // while the free parameters are still far from optimal (measured: a line with its slope at 0
  // stopped with the intercept 5 % off, gradient 1.75). So after each solve the parameters on a
  // bound whose cost gradient points out of the box are held there (SubsetManifold) and the rest
  // re-solved, until that set stops changing.
  std::vector<int> fixed;
  ceres::Solver::Summary summary;
  int iterations = 0;
  for (int round = 0; round < kMaxActiveSetRounds; ++round) {
    if (static_cast<int>(fixed.size()) < p) {
      ceres::Problem problem;
      BuildProblem(model, options, scale, used_rows, x.data(), problem, true);
      if (!fixed.empty()) problem.SetManifold(x.data(), new ceres::SubsetManifold(p, fixed));
      ceres::Solve(solver, &problem, &summary);
      iterations += summary.num_successful_steps + summary.num_unsuccessful_steps;
      if (summary.termination_type != ceres::CONVERGENCE) break;
    }
    std::vector<double> params(x.size());
    for (size_t i = 0; i < x.size(); ++i) params[i] = x[i] * scale[i];
    const std::vector<bool> at_bound = AtBound(model, params);
    ceres::Problem plain;
    BuildProblem(model, options, scale, used_rows, x.data(), plain, false);
    double cost = 0;
    std::vector<double> gradient;
    plain.Evaluate(ceres::Problem::EvaluateOptions(), &cost, nullptr, &gradient, nullptr);
    std::vector<int> next;
    for (int i = 0; i < p; ++i) {
      if (!at_bound[static_cast<size_t>(i)]) continue;
      const ParameterSpec& spec = model.parameters[static_cast<size_t>(i)];
      const bool on_lower = params[static_cast<size_t>(i)] == spec.lower ||
                            std::fabs(params[static_cast<size_t>(i)] - spec.lower) <
                                std::fabs(params[static_cast<size_t>(i)] - spec.upper);
      const double g = gradient[static_cast<size_t>(i)];
      if (on_lower ? g >= 0 : g <= 0) next.push_back(i);  // descent would leave the box
    }
    if (next == fixed) break;
    fixed = next;
  }

  LeastSquaresFit fit;
  fit.initial_params = clipped;
  fit.params.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) fit.params[i] = x[i] * scale[i];
  fit.final_cost = summary.final_cost;
  fit.iterations = iterations;
  fit.converged = summary.termination_type == ceres::CONVERGENCE;
  fit.termination_message = ceres::TerminationTypeToString(summary.termination_type) +
                            std::string(": ") + summary.message;
  fit.starts_converged = fit.converged ? 1 : 0;
  fit.at_bound = AtBound(model, fit.params);
  fit.std_errors.assign(fit.params.size(), std::nullopt);
  return fit;
}

LeastSquaresFit SolveLeastSquares(const LeastSquaresModel& model, const FitOptions& options) {
  options.Validate();
  CheckModel(model);
  StartSampler sampler(options.seed);
  const std::vector<double> centre = ClipToBounds(model, model.make_start(0, sampler));
  const std::vector<double> scale = SolverScale(model, centre);

  std::optional<LeastSquaresFit> best;
  std::optional<LeastSquaresFit> best_unconverged;
  int converged = 0;
  for (int start = 0; start < options.starts; ++start) {
    const std::vector<double> point = start == 0 ? centre : model.make_start(start, sampler);
    LeastSquaresFit fit = SolveFromStart(model, options, point, scale);
    fit.best_start = start;
    if (!std::isfinite(fit.final_cost)) fit.converged = false;
    if (fit.converged) {
      ++converged;
      if (!best || fit.final_cost < best->final_cost) best = std::move(fit);
    } else if (!best_unconverged || !(fit.final_cost >= best_unconverged->final_cost)) {
      best_unconverged = std::move(fit);
    }
  }
  if (!best) {
    std::ostringstream message;
    message << model.description << ": the solve did not converge from any of " << options.starts
            << " start(s) (max " << options.max_iterations << " iterations); Ceres: "
            << (best_unconverged ? best_unconverged->termination_message
                                 : std::string("no result"));
    throw base::Error(message.str());
  }
  best->starts_converged = converged;
  ComputeStandardErrors(model, options, *best);
  return *best;
}

void ComputeStandardErrors(const LeastSquaresModel& model, const FitOptions& options,
                           LeastSquaresFit& fit) {
  QuietCeresLogging();
  const int n = model.num_rows();
  const int p = model.num_parameters();
  fit.std_errors.assign(static_cast<size_t>(p), std::nullopt);
  if (n <= p) {
    fit.covariance = CovarianceStatus::kNoDegreesOfFreedom;
    fit.covariance_note = std::to_string(n) + " points for " + std::to_string(p) +
                          " parameters: no residual degrees of freedom, std errors undefined";
    return;
  }
  // Scale each coordinate by its fitted magnitude so the rank test compares like with like.
  std::vector<double> scale = SolverScale(model, fit.params);
  std::vector<double> x(static_cast<size_t>(p));
  for (size_t i = 0; i < x.size(); ++i) x[i] = fit.params[i] / scale[i];
  ceres::Problem problem;
  BuildProblem(model, options, scale, AllRows(model), x.data(), problem, false);
  if (!model.gauge_fixed.empty()) {
    if (static_cast<int>(model.gauge_fixed.size()) >= p) {
      throw base::Error(model.description + ": every parameter is gauge-fixed (internal)");
    }
    problem.SetManifold(x.data(), new ceres::SubsetManifold(p, model.gauge_fixed));
  }
  ceres::Covariance::Options covariance_options;
  covariance_options.algorithm_type = ceres::DENSE_SVD;
  covariance_options.null_space_rank = 0;  // fail rather than drop directions silently
  covariance_options.num_threads = 1;
  ceres::Covariance covariance(covariance_options);
  const std::vector<std::pair<const double*, const double*>> blocks = {{x.data(), x.data()}};
  std::vector<double> matrix(static_cast<size_t>(p * p), 0.0);
  if (!covariance.Compute(blocks, &problem) ||
      !covariance.GetCovarianceBlock(x.data(), x.data(), matrix.data())) {
    fit.covariance = CovarianceStatus::kRankDeficient;
    fit.covariance_note =
        "the Jacobian at the optimum is rank deficient (Ceres' reciprocal condition test failed): "
        "some parameter combinations are not determined by the data, so no std errors are given";
    return;
  }
  const double residual_variance = 2.0 * fit.final_cost / static_cast<double>(n - p);
  std::vector<std::optional<double>> errors(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    if (std::find(model.gauge_fixed.begin(), model.gauge_fixed.end(), i) !=
        model.gauge_fixed.end()) {
      continue;
    }
    const double variance = matrix[static_cast<size_t>(i * p + i)];
    if (!std::isfinite(variance) || variance < 0) {
      fit.covariance = CovarianceStatus::kRankDeficient;
      fit.covariance_note = "the covariance has a non-finite or negative variance for '" +
                            model.parameters[static_cast<size_t>(i)].name +
                            "'; no std errors given";
      return;
    }
    errors[static_cast<size_t>(i)] =
        scale[static_cast<size_t>(i)] * std::sqrt(variance * residual_variance);
  }
  fit.std_errors = errors;
  fit.covariance = CovarianceStatus::kOk;
  std::ostringstream note;
  note << "from (J^T J)^-1 at the optimum scaled by the residual variance 2 cost / (n - p) = "
       << residual_variance;
  if (!model.gauge_fixed.empty()) {
    note << "; conditional on";
    for (int index : model.gauge_fixed)
      note << " '" << model.parameters[static_cast<size_t>(index)].name << "'";
    note << (model.gauge_fixed.size() > 1 ? " held at their fitted values"
                                          : " held at its fitted value")
         << " (not determined by the data)";
  }
  fit.covariance_note = note.str();
}

std::vector<double> PredictRows(const LeastSquaresModel& model, const std::vector<double>& params) {
  std::vector<double> predicted(static_cast<size_t>(model.num_rows()));
  for (int row = 0; row < model.num_rows(); ++row)
    predicted[static_cast<size_t>(row)] = model.predict(params, row);
  return predicted;
}

std::optional<double> CrossValidatedRmse(const LeastSquaresModel& model, const FitOptions& options,
                                         const LeastSquaresFit& fit) {
  const std::optional<CrossValidatedErrors> errors = CrossValidate(model, options, fit);
  if (!errors) return std::nullopt;
  return errors->rmse;
}

std::optional<CrossValidatedErrors> CrossValidate(const LeastSquaresModel& model,
                                                  const FitOptions& options,
                                                  const LeastSquaresFit& fit) {
  const int n = model.num_rows();
  if (n < 2) return std::nullopt;
  const std::vector<std::vector<int>> folds = CrossValidationFolds(n);
  const std::vector<double> scale = SolverScale(model, fit.params);
  double squared_error = 0;
  double squared_relative_error = 0;
  for (const std::vector<int>& held_out : folds) {
    std::vector<int> training;
    for (int row = 0; row < n; ++row) {
      if (std::find(held_out.begin(), held_out.end(), row) == held_out.end())
        training.push_back(row);
    }
    if (static_cast<int>(training.size()) < model.num_parameters()) return std::nullopt;
    const LeastSquaresFit refit = SolveFromStart(model, options, fit.params, scale, training);
    for (int row : held_out) {
      const double measured = model.measured[static_cast<size_t>(row)];
      const double error = model.predict(refit.params, row) - measured;
      squared_error += error * error;
      const double relative = error / measured;
      squared_relative_error += relative * relative;
    }
  }
  const CrossValidatedErrors errors{std::sqrt(squared_error / static_cast<double>(n)),
                                    std::sqrt(squared_relative_error / static_cast<double>(n))};
  if (!std::isfinite(errors.rmse)) return std::nullopt;
  return errors;
}

}  // namespace moelab::fit
