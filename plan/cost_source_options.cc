#include "plan/cost_source_options.h"

#include <utility>

#include "base/error.h"
#include "executor/run_workload.h"
#include "fit/fit_json.h"
#include "fit/fit_options.h"
#include "fit/profile_cost_source.h"

namespace moelab::plan {

void CostSourceOptions::Validate() const {
  if (fitted_profile && hardware_given) throw Error("give --hardware or --profile, not both");
  if (fitted_profile && calibrate_profile) {
    throw Error(
        "give --profile (the fitted curves) or --calibrate (a calibrated preset), not both");
  }
  if (profiled_hardware && !calibrate_profile)
    throw Error("--profiled-hardware needs --calibrate PROFILE.json");
  if (calibrate_profile && !explicit_efficiency.empty()) {
    throw Error("give --" + explicit_efficiency +
                " or --calibrate, not both (the calibration fits it)");
  }
  assumed.Validate();
}

CostSources::CostSources(CostSourceOptions options, const PresetStore& store)
    : options_(std::move(options)), store_(store) {
  options_.Validate();
}

const Profile& CostSources::CalibrationProfile() {
  if (!options_.calibrate_profile) throw Error("no --calibrate profile given");
  if (!profile_) profile_ = std::make_unique<Profile>(LoadProfile(*options_.calibrate_profile));
  return *profile_;
}

bool CostSources::CalibrationProfileHas(const std::string& device) {
  for (const ProfileSample& sample : CalibrationProfile().samples) {
    if (sample.device == device) return true;
  }
  return false;
}

CostCalibration CostSources::Calibrate(const std::string& device, const HardwareSpec& predicted) {
  const Profile& profile = CalibrationProfile();
  if (!CalibrationProfileHas(device)) {
    throw Error(profile.origin + ": no samples on device '" + device + "', but hardware '" +
                predicted.name +
                "' computes there; calibrate with a profile measured on that device");
  }
  const int64_t threads = ProfiledThreads(profile);
  const std::string& dtype = options_.assumed.compute_dtype;
  RooflineDevice roofline;
  if (options_.profiled_hardware) {
    roofline = RooflineFromHardware(store_.LoadHardware(*options_.profiled_hardware), device, dtype,
                                    threads);
  } else if (device == "cpu" && profile.limits) {
    roofline = RooflineFromLimits(profile, dtype);
  } else {
    roofline = RooflineFromHardware(predicted, device, dtype, threads);
  }
  return CalibrateCosts(profile, roofline, options_.assumed, FitOptions{});
}

const LatencyFit& CostSources::Fit() {
  if (!options_.fitted_profile) throw Error("no --profile fit given");
  if (!fit_) fit_ = std::make_unique<LatencyFit>(LoadLatencyFit(*options_.fitted_profile));
  return *fit_;
}

std::shared_ptr<const CostSource> CostSources::ForHardware(const HardwareSpec& hardware) {
  if (!calibrated())
    return RooflineCostSource::ForHardware(hardware, options_.assumed, RooflineName(false));
  calibrations_.push_back(Calibrate(ComputeDeviceOf(hardware), hardware));
  return RooflineCostSource::ForHardware(hardware, calibrations_.back().params, RooflineName(true),
                                         {{"cost_calibration", calibrations_.back().ToJson()}});
}

std::shared_ptr<const CostSource> CostSources::Fitted(const MoeModelSpec& profiled_target,
                                                      const std::string& device) {
  const LatencyFit& fit = Fit();
  const std::string& path = *options_.fitted_profile;
  // A fit of another shape would be silently wrong.
  const nlohmann::json& shape =
      fit.model.contains("shape") ? fit.model["shape"] : nlohmann::json::object();
  if (!profiled_target.moe)
    throw Error("a fitted-profile prediction needs an MoE target; '" + profiled_target.name +
                "' is dense");
  for (const auto& [field, expected] :
       {std::pair<const char*, int64_t>{"layers", profiled_target.num_layers},
        {"hidden", profiled_target.hidden_size},
        {"experts", profiled_target.moe->num_experts},
        {"top_k", profiled_target.moe->top_k}}) {
    if (shape.contains(field) && shape[field].is_number_integer() &&
        shape[field].get<int64_t>() != expected) {
      throw Error(path + ": field 'model.shape." + field + "' is " + shape[field].dump() +
                  " but the executor shape of '" + profiled_target.name + "' has " +
                  std::to_string(expected) + "; profile the same model (moelab profile --model " +
                  profiled_target.name + ")");
    }
  }
  return std::make_shared<FittedProfileCostSource>(fit, profiled_target, device);
}

std::string CostSources::RooflineName(bool calibrated) {
  return calibrated ? "calibrated-roofline" : "analytic-roofline";
}

std::string ComputeDeviceOf(const HardwareSpec& hardware) {
  return hardware.has_accelerator() ? "gpu" : "cpu";
}

MoeModelSpec ExecutorTargetShape(const MoeModelSpec& target) {
  return SpecFromExecutorConfig(ExecutorConfigFromSpec(target, DefaultTargetShape()));
}

MoeModelSpec ExecutorDraftShape(const MoeModelSpec& draft, const MoeModelSpec& executor_target) {
  ShapeOverrides overrides = DefaultDraftShape();
  overrides.vocab = executor_target.vocab_size;
  return SpecFromExecutorConfig(ExecutorConfigFromSpec(draft, overrides));
}

}  // namespace moelab::plan
