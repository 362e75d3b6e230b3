#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "fit/latency_fit.h"
#include "fit/sd_fit.h"
#include "model/moesd_speedup.h"

namespace moelab::fit {

// Predictions from fitted models (what sim/ and `moelab fit predict` call).

// The fitted MoESD model's speedup at `point` (same ridge point and denominator as the fit).
// Refuses (moelab::Error) an invalid point: batch, gamma, K, E >= 1, K <= E, sigma in (0, 1].
double PredictSpeedup(const SdFit& fit, const model::SdPoint& point);

// `moelab fit predict`'s result ("moelab.fit_predict/1"): the point, the fit's denominator and
// the speedup PredictSpeedup gives there.
nlohmann::json SpeedupPredictionJson(const std::string& fit_path, const SdFit& fit,
                                     const model::SdPoint& point);

// The latency curve for (op, device, shape). `shape` may include "tokens" (and "bytes" for a
// curve against bytes); they are ignored for the match, as in FitLatency's grouping. Throws
// moelab::Error listing the fitted curves of that operator when there is no match.
const OperatorCurve& FindOperatorCurve(const LatencyFit& fit, const std::string& op,
                                       const std::string& device, const nlohmann::json& shape);

// Seconds for `x` tokens (or bytes, per the curve's variable) by the curve's best form.
double PredictLatency(const LatencyFit& fit, const std::string& op, const std::string& device,
                      const nlohmann::json& shape, double x);

}  // namespace moelab::fit
