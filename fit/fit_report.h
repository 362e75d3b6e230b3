#pragma once

#include <string>

#include "fit/cost_calibration.h"
#include "fit/latency_fit.h"
#include "fit/sd_fit.h"

namespace moelab::fit {

// How fit results print themselves as text (`moelab fit latency | sd | calibrate`); their JSON is
// fit_json.h's and CostCalibration::ToJson, and their CSV rows come from that JSON
// (report/json_rows.h), so the three formats carry the same numbers. `out` is the file the fit
// was written to (named on the last line).
std::string LatencyFitText(const LatencyFit& fit, const std::string& out);
std::string SdFitText(const SdFit& fit, const std::string& origin, const std::string& out);
std::string CalibrationText(const CostCalibration& calibration);

}  // namespace moelab::fit
