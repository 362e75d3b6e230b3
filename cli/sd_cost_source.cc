#include "cli/sd_cost_source.h"

#include <utility>

#include "cli/calibration_options.h"
#include "executor/run_workload.h"
#include "fit/fit_json.h"
#include "fit/profile_sd_costs.h"
#include "base/error.h"

namespace moelab::cli {

void AddProfileCostOption(po::options_description& options) {
  options.add_options()(
      "profile", po::value<std::string>(),
      "a latency fit (moelab fit latency) of a profile of this model: the measured cost source, instead of --hardware");
}

namespace {

// The profile measured the executor's shape of the model (moelab profile/run defaults); a fit of
// another shape would be silently wrong.
void UseProfiledShapes(const std::string& path, const LatencyFit& fit, SdCostSource& source) {
  const ExecutorConfig target_shape = ExecutorConfigFromSpec(source.target, DefaultTargetShape());
  ShapeOverrides draft_overrides = DefaultDraftShape();
  draft_overrides.vocab = target_shape.vocab_size;
  source.target = SpecFromExecutorConfig(target_shape);
  source.draft = SpecFromExecutorConfig(ExecutorConfigFromSpec(source.draft, draft_overrides));
  const nlohmann::json& shape = fit.model.contains("shape") ? fit.model["shape"] : nlohmann::json::object();
  const MoeModelSpec& target = source.target;
  for (const auto& [field, expected] : {std::pair<const char*, int64_t>{"layers", target.num_layers}, {"hidden", target.hidden_size},
                                        {"experts", target.moe->num_experts}, {"top_k", target.moe->top_k}}) {
    if (shape.contains(field) && shape[field].is_number_integer() && shape[field].get<int64_t>() != expected) {
      throw Error(path + ": field 'model.shape." + field + "' is " + shape[field].dump() + " but the executor shape of '" +
                  target.name + "' has " + std::to_string(expected) + "; profile the same model (moelab profile --model " +
                  target.name + ")");
    }
  }
}

}  // namespace

std::unique_ptr<SdCostSource> MakeSdCostSource(const po::variables_map& values, const PresetStore& store,
                                               const CostParameters& assumed, int64_t context_length) {
  auto source = std::make_unique<SdCostSource>();
  const bool from_profile = values.count("profile") > 0;
  if (from_profile && !values["hardware"].defaulted()) throw Error("give --hardware or --profile, not both");
  if (from_profile && WantsCalibration(values))
    throw Error("give --profile (the fitted curves) or --calibrate (a calibrated preset), not both");
  RefuseExplicitEfficiencies(values);
  source->target = store.LoadModel(values["model"].as<std::string>());
  source->draft = store.LoadModel(values["draft"].as<std::string>());
  source->params = assumed;
  if (from_profile) {
    const std::string path = values["profile"].as<std::string>();
    LatencyFit fit = LoadLatencyFit(path);
    UseProfiledShapes(path, fit, *source);
    source->hardware_name = "profile:" + path;
    source->display_name = source->hardware_name;
    source->costs = std::make_unique<ProfileSdStepCosts>(std::move(fit), source->target, source->draft, context_length);
    return source;
  }
  source->hardware = store.LoadHardware(values["hardware"].as<std::string>());
  source->hardware_name = source->hardware.name;
  source->display_name = source->hardware.display_name;
  if (WantsCalibration(values)) {
    source->calibration =
        CalibrateFromOptions(values, store, ComputeDeviceOf(source->hardware), source->hardware, assumed);
    source->params = source->calibration->params;
  }
  source->costs = std::make_unique<AnalyticSdStepCosts>(source->target, source->draft, source->hardware, source->params,
                                                        context_length, CostSourceName(source->calibration.has_value()));
  return source;
}

}  // namespace moelab::cli
