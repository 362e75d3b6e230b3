#include "plan/cost_source_options.h"

#include <utility>

#include "base/error.h"
#include "fit/fit_json.h"
#include "fit/fit_options.h"
#include "fit/profile_cost_source.h"

namespace moelab::plan {

void CostSourceOptions::Validate() const {
  if (fitted_profile && hardware_given) throw base::Error("give --hardware or --profile, not both");
  if (fitted_profile && calibrate_profile) {
    throw base::Error(
        "give --profile (the fitted curves) or --calibrate (a calibrated preset), not both");
  }
  if (profiled_hardware && !calibrate_profile)
    throw base::Error("--profiled-hardware needs --calibrate PROFILE.json");
  if (calibrate_profile && !explicit_efficiency.empty()) {
    throw base::Error("give --" + explicit_efficiency +
                      " or --calibrate, not both (the calibration fits it)");
  }
  assumed.Validate();
}

CostSources::CostSources(CostSourceOptions options, const model::PresetStore& store)
    : options_(std::move(options)), store_(store) {
  options_.Validate();
}

const fit::Profile& CostSources::CalibrationProfile() {
  if (!options_.calibrate_profile) throw base::Error("no --calibrate profile given");
  if (!profile_)
    profile_ = std::make_unique<fit::Profile>(fit::LoadProfile(*options_.calibrate_profile));
  return *profile_;
}

bool CostSources::CalibrationProfileHas(const std::string& device) {
  for (const fit::ProfileSample& sample : CalibrationProfile().samples) {
    if (sample.device == device) return true;
  }
  return false;
}

fit::CostCalibration CostSources::Calibrate(const std::string& device,
                                            const model::HardwareSpec& predicted) {
  const fit::Profile& profile = CalibrationProfile();
  if (!CalibrationProfileHas(device)) {
    throw base::Error(profile.origin + ": no samples on device '" + device + "', but hardware '" +
                      predicted.name +
                      "' computes there; calibrate with a profile measured on that device");
  }
  const int64_t threads = fit::ProfiledThreads(profile);
  const std::string& dtype = options_.assumed.compute_dtype;
  fit::RooflineDevice roofline;
  if (options_.profiled_hardware) {
    roofline = fit::RooflineFromHardware(store_.LoadHardware(*options_.profiled_hardware), device,
                                         dtype, threads);
  } else if (device == "cpu" && profile.limits) {
    roofline = fit::RooflineFromLimits(profile, dtype);
  } else {
    roofline = fit::RooflineFromHardware(predicted, device, dtype, threads);
  }
  return fit::CalibrateCosts(profile, roofline, options_.assumed, fit::FitOptions{});
}

const fit::LatencyFit& CostSources::Fit() {
  if (!options_.fitted_profile) throw base::Error("no --profile fit given");
  if (!fit_)
    fit_ = std::make_unique<fit::LatencyFit>(fit::LoadLatencyFit(*options_.fitted_profile));
  return *fit_;
}

std::shared_ptr<const model::CostSource> CostSources::ForHardware(
    const model::HardwareSpec& hardware) {
  if (!calibrated())
    return model::RooflineCostSource::ForHardware(hardware, options_.assumed, RooflineName(false));
  calibrations_.push_back(Calibrate(ComputeDeviceOf(hardware), hardware));
  return model::RooflineCostSource::ForHardware(
      hardware, calibrations_.back().params, RooflineName(true),
      {{"cost_calibration", calibrations_.back().ToJson()}});
}

model::MoeModelSpec CostSources::ProfiledTarget(const model::MoeModelSpec& model) {
  const model::ProfiledModel& measured = Fit().model;
  // The fit's curves describe the model it measured and nothing else: another model's name is
  // refused (its shape would be replaced by the profile's below, silently), and so are other bits
  // per weight than it measured.
  model::ProfiledModel wanted;
  wanted.name = model.name;
  wanted.expert_stored_bits = options_.expert_bits;
  wanted.attention_stored_bits = options_.attention_bits;
  measured.Require(wanted, "--model, --expert-bits, --attention-bits");
  return measured.ExecutorSpec(model);
}

std::shared_ptr<const model::CostSource> CostSources::Fitted(
    const model::MoeModelSpec& profiled_target, const std::string& device) {
  if (!profiled_target.moe)
    throw base::Error("a fitted-profile prediction needs an MoE target; '" + profiled_target.name +
                      "' is dense");
  // The source checks the target against what the profile measured.
  return std::make_shared<fit::FittedProfileCostSource>(Fit(), profiled_target, device);
}

std::string CostSources::RooflineName(bool calibrated) {
  return calibrated ? "calibrated-roofline" : "analytic-roofline";
}

std::string ComputeDeviceOf(const model::HardwareSpec& hardware) {
  return hardware.has_accelerator() ? "gpu" : "cpu";
}

}  // namespace moelab::plan
