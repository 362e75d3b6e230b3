#include "fit/cost_source_options.h"

#include <utility>

#include "base/error.h"
#include "fit/collective_cost_source.h"
#include "fit/fit_json.h"
#include "fit/fit_options.h"
#include "fit/profile_cost_source.h"

namespace moelab::fit {

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

const Profile& CostSources::CalibrationProfile() {
  if (!options_.calibrate_profile) throw base::Error("no --calibrate profile given");
  if (!profile_) profile_ = std::make_unique<Profile>(LoadProfile(*options_.calibrate_profile));
  return *profile_;
}

bool CostSources::CalibrationProfileHas(const std::string& device) {
  for (const ProfileSample& sample : CalibrationProfile().samples) {
    if (sample.device == device) return true;
  }
  return false;
}

CostCalibration CostSources::Calibrate(const std::string& device,
                                       const model::HardwareSpec& predicted) {
  const Profile& profile = CalibrationProfile();
  if (!CalibrationProfileHas(device)) {
    throw base::Error(profile.origin + ": no samples on device '" + device + "', but hardware '" +
                      predicted.name +
                      "' computes there; calibrate with a profile measured on that device");
  }
  if (options_.profiled_hardware)
    return CalibrateOn(profile, store_.LoadHardware(*options_.profiled_hardware), device,
                       options_.assumed);
  if (device == "cpu" && profile.limits)
    return CalibrateOn(profile, std::nullopt, device, options_.assumed);
  const RooflineDevice roofline = RooflineFromHardware(
      predicted, device, options_.assumed.compute_dtype, ProfiledThreads(profile));
  return CalibrateCosts(profile, roofline, options_.assumed, FitOptions{});
}

CostCalibration CostSources::CalibrateOn(const Profile& profile,
                                         const std::optional<model::HardwareSpec>& measured_on,
                                         const std::string& device,
                                         const model::CostParameters& assumed) {
  return CalibrateCosts(profile,
                        ProfiledRoofline(profile, measured_on, device, assumed.compute_dtype),
                        assumed, FitOptions{});
}

const LatencyFit& CostSources::Fit() {
  if (!options_.fitted_profile) throw base::Error("no --profile fit given");
  if (!fit_) fit_ = std::make_unique<LatencyFit>(LoadLatencyFit(*options_.fitted_profile));
  return *fit_;
}

std::shared_ptr<const model::CollectiveCost> CostSources::MeasuredCollectives() {
  if (fitted()) {
    const LatencyFit& fit = Fit();
    if (!HasCollectiveCurves(fit)) return nullptr;
    return std::make_shared<FittedCollectiveCost>(fit.operators, fit.profile);
  }
  if (!calibrated()) return nullptr;
  const Profile collectives = CollectiveSamplesOf(CalibrationProfile());
  if (collectives.samples.empty()) return nullptr;
  const LatencyFit fit = FitLatency(collectives, FitOptions{});
  return std::make_shared<FittedCollectiveCost>(fit.operators, collectives.origin);
}

std::shared_ptr<const model::CostSource> CostSources::ForHardware(
    const model::HardwareSpec& hardware) {
  if (!calibrated()) {
    return Roofline(model::ComputeTargetOf(hardware, options_.assumed.compute_dtype),
                    options_.assumed);
  }
  calibrations_.push_back(Calibrate(ComputeDeviceOf(hardware), hardware));
  const CostCalibration& calibration = calibrations_.back();
  return Roofline(model::ComputeTargetOf(hardware, calibration.params.compute_dtype),
                  calibration.params, &calibration);
}

namespace {

// The node's accelerator alone: the simulator models one accelerator and its host.
model::HardwareSpec AcceleratorAlone(const model::HardwareSpec& hardware) {
  model::HardwareSpec accelerator = hardware;
  accelerator.kind = model::HardwareKind::kAccelerator;
  accelerator.accelerator_count = 1;
  accelerator.interconnect.reset();
  return accelerator;
}

// The simulator's rooflines: the accelerator's with `params` (calibrated by `calibration` when
// given), the host's on `cpu_threads` threads with `host_params` (`host_calibration`).
void SetRooflines(OffloadSources& sources, const model::HardwareSpec& hardware, int64_t cpu_threads,
                  const CostCalibration* calibration, const CostCalibration* host_calibration) {
  const model::CostParameters& params = sources.accelerator_params;
  const model::CostParameters& host_params = sources.host_params.value_or(params);
  if (hardware.has_accelerator()) {
    sources.accelerator = CostSources::Roofline(
        model::ComputeTargetOf(AcceleratorAlone(hardware), params.compute_dtype), params,
        calibration);
  }
  const int64_t threads =
      cpu_threads > 0 ? cpu_threads : (hardware.host ? hardware.host->cores : 1);
  if (hardware.host && threads >= 1) {
    sources.host =
        CostSources::Roofline(model::HostTargetOf(hardware, threads, host_params.compute_dtype),
                              host_params, host_calibration);
  }
}

}  // namespace

OffloadSources AnalyticOffloadSources(const model::MoeModelSpec& model,
                                      const model::HardwareSpec& hardware, int64_t cpu_threads,
                                      const model::CostParameters& params,
                                      const std::optional<model::CostParameters>& host_params) {
  OffloadSources sources;
  sources.model = model;
  sources.accelerator_params = params;
  sources.host_params = host_params;
  SetRooflines(sources, hardware, cpu_threads, nullptr, nullptr);
  return sources;
}

OffloadSources CostSources::ForOffload(const model::MoeModelSpec& model,
                                       const model::HardwareSpec& hardware, int64_t cpu_threads) {
  OffloadSources sources;
  sources.model = model;
  sources.accelerator_params = options_.assumed;
  if (calibrated()) {
    std::optional<CostCalibration> cpu, gpu;
    if (CalibrationProfileHas("cpu")) {
      cpu = Calibrate("cpu", hardware);
      sources.host_params = cpu->params;
      sources.calibrations.push_back(*cpu);
    }
    if (CalibrationProfileHas("gpu")) {
      gpu = Calibrate("gpu", hardware);
      sources.accelerator_params = gpu->params;
      sources.calibrations.push_back(*gpu);
    }
    if (sources.calibrations.empty())
      throw base::Error(CalibrationProfile().origin + ": no cpu or gpu samples to calibrate with");
    SetRooflines(sources, hardware, cpu_threads, gpu ? &*gpu : nullptr, cpu ? &*cpu : nullptr);
    return sources;
  }
  if (!fitted()) {
    SetRooflines(sources, hardware, cpu_threads, nullptr, nullptr);
    return sources;
  }
  const LatencyFit& fit = Fit();
  // The curves price the layer shapes the profile measured: simulate the shape it recorded.
  sources.model = ProfiledTarget(model);
  const bool cpu = FittedProfileCostSource::HasDevice(fit, "cpu");
  const bool gpu = FittedProfileCostSource::HasDevice(fit, "gpu");
  // This machine with its experts on storage (moelab hw from-profile): the CPU is the compute
  // device, so its curves price everything the simulator computes, as validate does -- whatever
  // GPU curves the profile also holds.
  if (hardware.compute_device_is_host) {
    if (!cpu) {
      throw base::Error(*options_.fitted_profile + ": the fit has no cpu curves, and hardware '" +
                        hardware.name + "' computes on its CPU (moelab hw from-profile)");
    }
    sources.host = Fitted(sources.model, "cpu");
    sources.accelerator = sources.host;
    return sources;
  }
  if (!cpu && !gpu)
    throw base::Error(*options_.fitted_profile + ": the fit has no cpu or gpu curves");
  SetRooflines(sources, hardware, cpu_threads, nullptr, nullptr);  // for a device without curves
  if (cpu) sources.host = Fitted(sources.model, "cpu");
  if (gpu) sources.accelerator = Fitted(sources.model, "gpu");
  return sources;
}

model::MoeModelSpec CostSources::ProfiledTarget(const model::MoeModelSpec& model) {
  const model::ProfiledModel& measured = Fit().model;
  // A fit that does not say which model it measured (its profile had no "model") cannot be
  // matched to --model: any model would be priced by another model's curves without a word.
  if (!measured.name)
    throw base::Error(*options_.fitted_profile +
                      ": the fit does not record which model its profile measured (field "
                      "'model.name'), so its curves cannot be matched to --model '" +
                      model.name + "'; fit a profile written by `moelab profile`");
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

void CostSources::RequireProfiledDraft(const model::MoeModelSpec& draft) {
  RequireDraft(Fit().draft_name, *options_.fitted_profile, draft);
}

void CostSources::RequireDraft(const std::optional<std::string>& measured, const std::string& fit,
                               const model::MoeModelSpec& draft) {
  if (measured && *measured != draft.name) {
    throw base::Error(fit + ": the profile measured draft '" + *measured + "', not '" + draft.name +
                      "' (--draft): its draft_decode curves price the profiled draft only; "
                      "profile with --draft " +
                      draft.name + " to compare drafts");
  }
}

std::shared_ptr<const model::CostSource> CostSources::Fitted(
    const model::MoeModelSpec& profiled_target, const std::string& device) {
  if (!profiled_target.moe)
    throw base::Error("a fitted-profile prediction needs an MoE target; '" + profiled_target.name +
                      "' is dense");
  // The curves price the model the profile measured: its layer shape and weight formats.
  model::ProfiledModel target = model::ProfiledModel::Of(profiled_target);
  target.name.reset();  // checked by ProfiledTarget (a file's model may be named otherwise)
  Fit().model.Require(target, "the executor shape of '" + profiled_target.name + "'");
  return FittedSource(Fit(), profiled_target, device);
}

std::shared_ptr<const model::CostSource> CostSources::Roofline(const model::RooflineTarget& target,
                                                               const model::CostParameters& params,
                                                               const CostCalibration* calibration) {
  return std::make_shared<model::RooflineCostSource>(
      target, params, RooflineName(calibration != nullptr),
      calibration ? nlohmann::json{{"cost_calibration", calibration->ToJson()}}
                  : nlohmann::json::object());
}

std::shared_ptr<const model::CostSource> CostSources::ProfiledMachineRoofline(
    const Profile& profile) {
  const std::string dtype =
      profile.limits && profile.limits->peak_flops.count("bf16") ? "bf16" : "fp32";
  model::CostParameters assumed;
  assumed.compute_dtype = dtype;
  const CostCalibration calibration =
      CalibrateCosts(profile, RooflineFromLimits(profile, dtype), assumed, FitOptions{});
  return Roofline(model::ComputeTargetOf(HardwareFromProfile(profile), dtype), calibration.params,
                  &calibration);
}

std::shared_ptr<const model::CostSource> CostSources::FittedSource(
    const LatencyFit& fit, const model::MoeModelSpec& profiled_target, const std::string& device) {
  // The source checks the target against what the profile measured.
  return std::make_shared<FittedProfileCostSource>(fit, profiled_target, device);
}

std::string CostSources::RooflineName(bool calibrated) {
  return calibrated ? "calibrated-roofline" : "analytic-roofline";
}

std::string ComputeDeviceOf(const model::HardwareSpec& hardware) {
  return hardware.has_accelerator() ? "gpu" : "cpu";
}

}  // namespace moelab::fit
