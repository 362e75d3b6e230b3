#include "fit/predict.h"

#include <cmath>

#include "base/error.h"
#include "base/limits.h"
#include "model/moe_math.h"
#include "fit/sd_measurements.h"

namespace moelab::fit {

double PredictSpeedup(const SdFit& fit, const model::SdPoint& point) {
  if (point.batch < 1 || point.gamma < 1 || point.top_k < 1 || point.num_experts < 1) {
    throw base::Error("sd prediction: batch, gamma, K and E must be >= 1");
  }
  // The bounds a measured point has (fit/sd_measurements.h, docs/limits.md): a prediction is asked
  // of no point a measurement could not be.
  if (point.batch > kMaxSdPointCount || point.gamma > kMaxSdPointCount) {
    throw base::Error("sd prediction: batch and gamma must be at most 1e15, got " +
                      std::to_string(point.batch) + " and " + std::to_string(point.gamma));
  }
  if (point.num_experts > base::kMaxExperts) {
    throw base::Error("sd prediction: E must be at most " + std::to_string(base::kMaxExperts) +
                      " (docs/limits.md), got " + std::to_string(point.num_experts));
  }
  if (point.top_k > point.num_experts) {
    throw base::Error("sd prediction: K = " + std::to_string(point.top_k) +
                      " exceeds E = " + std::to_string(point.num_experts));
  }
  if (!(std::isfinite(point.sigma) && point.sigma > 0 && point.sigma <= 1)) {
    throw base::Error("sd prediction: sigma must be in (0, 1], got " + std::to_string(point.sigma));
  }
  if (!model::SigmaYieldsAToken(point.sigma, point.gamma)) {
    throw base::Error("sd prediction: sigma " + std::to_string(point.sigma) + " at gamma " +
                      std::to_string(point.gamma) +
                      " accepts fewer than the 1 token every round yields (sigma >= 1 / (gamma + "
                      "1) expected)");
  }
  const double speedup =
      model::MoesdSpeedup(fit.params, point, fit.ridge_point_tokens(), fit.denominator);
  if (!std::isfinite(speedup)) {
    throw base::Error("sd prediction at batch " + std::to_string(point.batch) + ", gamma " +
                      std::to_string(point.gamma) +
                      ": the fit's model gives a non-finite speedup there (the " +
                      "point is outside what the fitted parameters can describe)");
  }
  return speedup;
}

const OperatorCurve& FindOperatorCurve(const LatencyFit& fit, const std::string& op,
                                       const std::string& device, const nlohmann::json& shape) {
  std::string known;
  for (const OperatorCurve& curve : fit.operators) {
    if (curve.op != op) continue;
    nlohmann::json key = shape;
    key.erase("tokens");
    if (curve.variable == "bytes") key.erase("bytes");
    // The kernel's token tiling is the profile's to know, not the caller's.
    nlohmann::json fitted = curve.shape;
    fitted.erase("token_tiling");
    key.erase("token_tiling");
    if (curve.device == device && fitted == key) return curve;
    known += (known.empty() ? "" : ", ") + curve.device + " " + curve.shape.dump();
  }
  throw base::Error("no fitted latency curve for operator '" + op + "' on '" + device +
                    "' with shape " + shape.dump() +
                    (known.empty() ? ": the fit has no curve for that operator"
                                   : "; fitted for that operator: " + known));
}

double PredictLatency(const LatencyFit& fit, const std::string& op, const std::string& device,
                      const nlohmann::json& shape, double x) {
  const OperatorCurve& curve = FindOperatorCurve(fit, op, device, shape);
  const double seconds = curve.variable == "tokens" && x == std::floor(x) && x >= 1
                             ? curve.PredictTokens(static_cast<int64_t>(x))
                             : curve.Predict(x);
  if (!std::isfinite(seconds)) {
    throw base::Error("latency prediction for operator '" + op + "' on '" + device + "' at " +
                      std::to_string(x) + ": the fitted curve gives a non-finite time there");
  }
  return seconds;
}

nlohmann::json SpeedupPredictionJson(const std::string& fit_path, const SdFit& fit,
                                     const model::SdPoint& point) {
  return {{"schema", "moelab.fit_predict/1"},
          {"fit", fit_path},
          {"batch", point.batch},
          {"gamma", point.gamma},
          {"K", point.top_k},
          {"E", point.num_experts},
          {"sigma", point.sigma},
          {"denominator", ToString(fit.denominator)},
          {"speedup", PredictSpeedup(fit, point)}};
}

}  // namespace moelab::fit
