#include "validate/impl/cost_sources.h"

#include <nlohmann/json.hpp>

#include "fit/cost_calibration.h"
#include "fit/profile_cost_source.h"
#include "model/hardware_spec.h"

namespace moelab::validate::impl {

std::shared_ptr<const model::CostSource> FittedCostSource(const fit::LatencyFit& fit,
                                                          const model::MoeModelSpec& target,
                                                          const std::string& device) {
  return std::make_shared<fit::FittedProfileCostSource>(fit, target, device);
}

std::shared_ptr<const model::CostSource> CalibratedCostSource(const fit::Profile& profile) {
  const std::string dtype =
      profile.limits && profile.limits->peak_flops.count("bf16") ? "bf16" : "fp32";
  model::CostParameters assumed;
  assumed.compute_dtype = dtype;
  const fit::CostCalibration calibration = fit::CalibrateCosts(
      profile, fit::RooflineFromLimits(profile, dtype), assumed, fit::FitOptions{});
  const model::HardwareSpec machine = fit::HardwareFromProfile(profile);
  return std::make_shared<model::RooflineCostSource>(
      model::ComputeTargetOf(machine, dtype), calibration.params, "calibrated-roofline",
      nlohmann::json{{"cost_calibration", calibration.ToJson()}});
}

CostSources CostSourcesFor(const fit::LatencyFit& fit, const fit::Profile& profile,
                           const model::MoeModelSpec& target, bool on_gpu) {
  CostSources made;
  made.sources.push_back(FittedCostSource(fit, target, on_gpu ? "cuda:0" : "cpu"));
  if (on_gpu) {
    made.notes.push_back(
        "--device gpu: no calibrated-roofline predictions (the profile measures the CPU's limits, "
        "not the GPU's)");
  } else if (profile.limits) {
    made.sources.push_back(CalibratedCostSource(profile));
  } else {
    made.notes.push_back(
        "the profile has no measured machine limits: no calibrated-roofline predictions");
  }
  return made;
}

}  // namespace moelab::validate::impl
