#include "plan/cost_source_options.h"

#include <cmath>
#include <utility>

#include "base/error.h"
#include "executor/run_workload.h"
#include "fit/fit_json.h"
#include "fit/fit_options.h"
#include "fit/profile_cost_source.h"
#include "report/format.h"

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

namespace {

// Stored bits per weight the profile measured a part on ("expert" or "attention"); 16 (bf16) for
// profiles written before the formats were recorded.
double ProfiledBits(const nlohmann::json& shape, const std::string& part, const std::string& path) {
  const std::string field = part + "_stored_bits";
  if (!shape.contains(field)) return 16.0;
  if (!shape[field].is_number() || !(shape[field].get<double>() > 0))
    throw base::Error(path + ": field 'model.shape." + field +
                      "' must be a positive number of bits per weight");
  return shape[field].get<double>();
}

// The bits a command line names a format by (moelab run --expert-bits 16|8|4), beside its stored
// bits (16, 8.5, 4.5: scales included); 0 for a name this build does not know.
double NominalBits(const std::string& format) {
  return format == "bf16" ? 16.0 : format == "q8_0" ? 8.0 : format == "q4_0" ? 4.0 : 0.0;
}

std::string FormatOf(const nlohmann::json& shape, const std::string& part) {
  const std::string field = part + "_format";
  return shape.contains(field) && shape[field].is_string() ? shape[field].get<std::string>()
                                                           : std::string("bf16");
}

// The shape overrides the profile ran the executor with (its model.shape: moelab profile --layers
// ... scales the model as moelab run does); the executor's default shape for the fields a profile
// did not record.
executor::ShapeOverrides ProfiledShape(const nlohmann::json& shape, const std::string& path) {
  executor::ShapeOverrides overrides = executor::DefaultTargetShape();
  const std::pair<const char*, std::optional<int64_t>*> fields[] = {
      {"layers", &overrides.layers},
      {"hidden", &overrides.hidden},
      {"intermediate", &overrides.intermediate},
      {"dense_intermediate", &overrides.dense_intermediate},
      {"experts", &overrides.experts},
      {"top_k", &overrides.top_k},
      {"heads", &overrides.heads},
      {"kv_heads", &overrides.kv_heads},
      {"head_dim", &overrides.head_dim},
      {"vocab", &overrides.vocab},
      {"shared_experts", &overrides.shared_experts},
      {"shared_intermediate", &overrides.shared_intermediate},
      {"max_positions", &overrides.max_positions}};
  for (const auto& [field, value] : fields) {
    if (!shape.contains(field)) continue;
    if (!shape[field].is_number_integer() || shape[field].get<int64_t>() < 0)
      throw base::Error(path + ": field 'model.shape." + field +
                        "' must be a non-negative integer");
    *value = shape[field].get<int64_t>();
  }
  return overrides;
}

model::MoeModelSpec ExecutorSpecAt(const model::MoeModelSpec& model,
                                   const executor::ShapeOverrides& overrides) {
  return executor::SpecFromExecutorConfig(executor::ExecutorConfigFromSpec(model, overrides));
}

}  // namespace

model::MoeModelSpec CostSources::ProfiledTarget(const model::MoeModelSpec& model) {
  const fit::LatencyFit& fit = Fit();
  const std::string& path = *options_.fitted_profile;
  const nlohmann::json& shape =
      fit.model.contains("shape") ? fit.model["shape"] : nlohmann::json::object();
  // The fit's curves describe the model it measured and nothing else: another model's name is
  // refused (its shape would be replaced by the profile's below, silently).
  if (fit.model.contains("name") && fit.model["name"].is_string() &&
      fit.model["name"].get<std::string>() != model.name) {
    throw base::Error(path + ": the profile measured '" + fit.model["name"].get<std::string>() +
                      "', not '" + model.name + "'; give --model " +
                      fit.model["name"].get<std::string>() + " or profile '" + model.name +
                      "' (moelab profile --model " + model.name + ")");
  }
  model::MoeModelSpec target = ExecutorSpecAt(model, ProfiledShape(shape, path));
  const std::pair<const char*, const std::optional<double>*> parts[] = {
      {"expert", &options_.expert_bits}, {"attention", &options_.attention_bits}};
  for (const auto& [part, asked] : parts) {
    const double profiled = ProfiledBits(shape, part, path);
    // Either the stored bits (4.5) or the bits the format is asked for by (4) name it.
    if (*asked && std::abs(**asked - profiled) > 1e-9 &&
        std::abs(**asked - NominalBits(FormatOf(shape, part))) > 1e-9) {
      throw base::Error(path + ": the profile measured " + std::string(part) + " weights as " +
                        FormatOf(shape, part) + " (" + report::ShortestText(profiled) +
                        " bits per weight), not the " + report::ShortestText(**asked) +
                        " bits asked for: profile with moelab profile --" + part +
                        "-bits matching, or leave --" + part + "-bits out");
    }
    (std::string(part) == "expert" ? target.bits.experts : target.bits.attention) = profiled;
  }
  return target;
}

std::shared_ptr<const model::CostSource> CostSources::Fitted(
    const model::MoeModelSpec& profiled_target, const std::string& device) {
  const fit::LatencyFit& fit = Fit();
  const std::string& path = *options_.fitted_profile;
  // A fit of another shape would be silently wrong.
  const nlohmann::json& shape =
      fit.model.contains("shape") ? fit.model["shape"] : nlohmann::json::object();
  if (!profiled_target.moe)
    throw base::Error("a fitted-profile prediction needs an MoE target; '" + profiled_target.name +
                      "' is dense");
  for (const auto& [field, expected] :
       {std::pair<const char*, int64_t>{"layers", profiled_target.num_layers},
        {"hidden", profiled_target.hidden_size},
        {"experts", profiled_target.moe->num_experts},
        {"top_k", profiled_target.moe->top_k}}) {
    if (shape.contains(field) && shape[field].is_number_integer() &&
        shape[field].get<int64_t>() != expected) {
      throw base::Error(path + ": field 'model.shape." + field + "' is " + shape[field].dump() +
                        " but the executor shape of '" + profiled_target.name + "' has " +
                        std::to_string(expected) +
                        "; profile the same model (moelab profile --model " + profiled_target.name +
                        ")");
    }
  }
  return std::make_shared<fit::FittedProfileCostSource>(fit, profiled_target, device);
}

std::string CostSources::RooflineName(bool calibrated) {
  return calibrated ? "calibrated-roofline" : "analytic-roofline";
}

std::string ComputeDeviceOf(const model::HardwareSpec& hardware) {
  return hardware.has_accelerator() ? "gpu" : "cpu";
}

model::MoeModelSpec ExecutorDraftShape(const model::MoeModelSpec& draft,
                                       const model::MoeModelSpec& executor_target) {
  executor::ShapeOverrides overrides = executor::DefaultDraftShape();
  overrides.vocab = executor_target.vocab_size;
  return executor::SpecFromExecutorConfig(executor::ExecutorConfigFromSpec(draft, overrides));
}

}  // namespace moelab::plan
