#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/fit_options.h"
#include "fit/latency_profile.h"
#include "model/profiled_model.h"

namespace moelab::fit {

// Per-operator latency curves fitted to a profile (fit/latency_profile.h).
//
// Samples are grouped by (operator, device, shape without "tokens") and each group's median_s is
// fitted against x = tokens with three forms:
//   roofline  time(x) = bias + k * G(x; P, s)   G from formulas.md section 1 (model/
//             moesd_speedup.h RooflineG); bias >= 0 s, k >= 0 s, P in [x_min, x_max] tokens
//             (the transition point), s in [1, 2]
//   quadratic time(x) = a + b * x + c * x^2      a, b, c >= 0; only for operators whose work grows
//             with x squared (prefill attention: x (x + 1) / 2 query-key pairs), x = tokens
//   linear    time(x) = a + b * x                a >= 0 s, b >= 0 s per token (Fiddler's cpu_lat)
//   constant  time(x) = c                        c >= 0 s (Fiddler's gpu_lat / trans_lat)
//   interpolated  piecewise linear through the measured points (x_i, median time at x_i), for
//             x = tokens with >= 5 distinct counts (fewer points of a convex curve, such as
//             prefill attention's, overshoot between them): kernels change regime at tile and cache
//             boundaries (e.g. an AVX2 expert FFN jumps 40 % from 5 to 6 tokens), which no smooth
//             form follows. Below the smallest x it is the smallest x's time (a pass never costs
//             less than the smallest profiled one); above the largest it continues the last
//             segment (its slope when >= 0, else the mean slope over all points, else flat).
//             Its cross-validated RMSE is leave-one-out: each point predicted from the others,
//             except at a knot where every token count between its neighbours computes (after
//             the kernel's token_tiling) to a profiled count: no call there is ever interpolated,
//             so its held-out error is its own noise against a later run's, sqrt(2) x the
//             median's standard error from the sample's repetition_s (robust: from their median
//             absolute deviation). Holding such a knot out judged the interpolation across twice
//             the grid's spacing, where no call lands, and chose an expert roofline that missed
//             the kernel's seams by -12 % at 13 tokens, +15 % at 24 and -16 % at 32 (validate
//             --quick, bf16, 2026-12-07). The knot's own distance from the sample (pooled knots,
//             several samples at one x) is added to that noise.
// A form is fitted only with more points than parameters and, for the roofline, at least 5
// distinct x (otherwise a note says why). Residuals are relative, (model - measured) / measured:
// times span decades across token counts and profiler noise is multiplicative, so absolute
// residuals would let the largest times decide alone. Metrics are on absolute seconds (rmse_s,
// loo_rmse_s) and percent (mape). `best` is the form with the lowest cross-validated RMSE
// (leave-one-out for n <= 60, else 5-fold), except that over tokens the interpolation is judged
// against the best smooth form on the relative one (loo_relative_rmse, as the residuals; the
// reasons in latency_fit.cc); within 1 % counts as a tie, and ties go to the form
// with fewer parameters (interpolated counts as the most).
//
// Transfer operators whose shape carries "bytes" (memcpy_host, storage_read, h2d_pinned) are
// usually profiled at one token count: when a group has fewer than 3 distinct token counts and
// its shapes have a numeric "bytes", the samples are regrouped by (operator, device, shape without
// tokens and bytes, tokens) and fitted against x = bytes with the constant and linear forms only
// (b is then seconds per byte). Any group still short of 3 distinct x values is listed in
// `skipped` with the reason; it never fails the fit. A form whose solve does not converge is
// left out with a note; a group with no fitted form is skipped.

// In order of parameters, most first (the best-form scan prefers the later of two tied forms).
enum class LatencyForm { kInterpolated, kRoofline, kQuadratic, kLinear, kConstant };
// "interpolated" | "roofline" | "quadratic" | "linear" | "constant"
std::string ToString(LatencyForm form);
LatencyForm LatencyFormFromString(const std::string& name);  // throws moelab::Error, listing them
// Parameter names in order: roofline {bias, k, P, s}, quadratic {a, b, c}, linear {a, b},
// constant {c}; none for
// interpolated, whose params are its knots flattened: x0, seconds0, x1, seconds1, ... (x
// strictly increasing, at least two knots).
const std::vector<std::string>& LatencyFormParameterNames(LatencyForm form);
// Value of the form at x (tokens or bytes), in seconds.
double EvaluateLatencyForm(LatencyForm form, const std::vector<double>& params, double x);

struct LatencyFormFit {
  LatencyForm form = LatencyForm::kConstant;
  std::vector<double> params;                     // LatencyFormParameterNames order (or knots)
  std::vector<std::optional<double>> std_errors;  // empty entries when not determined
  std::string covariance_status = "not_computed";
  std::vector<std::string> at_bound;
  double rmse_s = 0;
  double mape = 0;  // percent
  std::optional<double> r2;
  std::optional<double> loo_rmse_s;
  // The same held-out predictions' root mean square relative error (what `best` compares).
  std::optional<double> loo_relative_rmse;
};

struct OperatorCurve {
  std::string op;
  std::string device;
  nlohmann::json shape;           // the group's shape, without "tokens" (and "bytes" for x = bytes)
  std::string variable;           // "tokens" or "bytes"
  std::optional<int64_t> tokens;  // the fixed token count when variable == "bytes"
  int64_t n = 0;
  double x_min = 0;
  double x_max = 0;
  std::vector<LatencyFormFit>
      forms;  // in the order interpolated, roofline, quadratic, linear, constant (those fitted)
  LatencyForm best = LatencyForm::kConstant;
  std::vector<std::string> notes;

  const LatencyFormFit* Form(LatencyForm form) const;  // nullptr when not fitted
  const LatencyFormFit& Best() const;
  // The best form's time at x (tokens or bytes, per `variable`), seconds.
  double Predict(double x) const;
  // The time of a call of `tokens` tokens (variable == "tokens"): the curve at the tokens the
  // profiled kernel computes for them (ComputedTokens).
  double PredictTokens(int64_t tokens) const;
};

// The tokens a profiled CPU kernel computes for a call of `tokens` tokens: shape.token_tiling
// {exact_up_to, multiple} (written by the profiler, kernels/weight_matrix.h TokenTiling) rounds
// calls above exact_up_to up to a multiple; without it, `tokens`. A malformed token_tiling is a
// moelab::Error naming the field.
int64_t ComputedTokens(const nlohmann::json& shape, int64_t tokens);

struct SkippedGroup {
  std::string op;
  std::string device;
  nlohmann::json shape;
  std::string reason;
};

struct LatencyFit {
  std::string profile;  // the profile's path
  nlohmann::json machine = nlohmann::json::object();
  model::ProfiledModel model;             // what the profile measured (its model and kernel path)
  std::optional<std::string> draft_name;  // the draft its draft_decode curves measured
  std::vector<OperatorCurve> operators;
  std::vector<SkippedGroup> skipped;
  FitOptions options;
};

// Fits every group of `profile` (groups in order of first appearance; deterministic).
LatencyFit FitLatency(const Profile& profile, const FitOptions& options);

}  // namespace moelab::fit
