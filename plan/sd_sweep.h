#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/cost_calibration.h"
#include "fit/sd_fit.h"
#include "model/cost_source.h"
#include "model/model_spec.h"
#include "model/preset_store.h"
#include "model/sd_plan.h"
#include "fit/cost_source_options.h"
#include "routing/routing_spec.h"

namespace moelab::plan {

// The speculative-decoding sweep behind `moelab plan sd` (one acceptance level) and `moelab sim sd`
// (several): speedup, target efficiency and round shares over batch x gamma at each alpha (or fixed
// sigma), best gamma per batch, the batch range where SD pays.
struct SdSweepRequest {
  std::string model;  // target preset or path
  std::string draft;
  fit::CostSourceOptions cost;
  model::SdPlanOptions plan;   // batches, gammas, context, verify (alpha/sigma set per level)
  std::vector<double> levels;  // alphas in [0, 1), or sigmas in (0, 1] when by_sigma
  bool by_sigma = false;
  std::optional<std::string> sd_fit;  // a fitted MoESD model whose speedup is reported per row
  // How the target's tokens route, for the distinct experts each pass reads (uniform: N(t));
  // `routing_seed` seeds the synthetic sources.
  routing::RoutingSpec routing;
  uint64_t routing_seed = 1;

  void Validate() const;  // Error naming the option
};

struct SdSweepLevel {
  double level = 0;
  model::SdPlan plan;
};

struct SdSweepResult {
  model::MoeModelSpec target, draft;  // with --profile, the executor shapes the profile measured
  std::string hardware;               // the preset, or "profile:FIT.json"
  std::string display_name;
  bool by_sigma = false;
  model::SdPlanOptions plan;
  std::shared_ptr<const model::CostSource> source;
  std::shared_ptr<const model::ExpertActivation> target_routing;  // nullptr: uniform
  std::optional<fit::CostCalibration> calibration;
  std::optional<fit::SdFit> sd_fit;
  std::string sd_fit_path;
  std::vector<SdSweepLevel> levels;

  // The MoESD fit's speedup for a row (nullopt without --sd-fit or for a dense target).
  std::optional<double> MoesdSpeedup(const model::SdPlanRow& row) const;
};

// The routing a prediction prices `target`'s passes with: nullptr for uniform (the closed form),
// else the sampled activation (routing/expert_activation_sampler.h). Error for a dense target.
std::shared_ptr<const model::ExpertActivation> TargetRouting(const routing::RoutingSpec& routing,
                                                             const model::MoeModelSpec& target,
                                                             uint64_t seed);

SdSweepResult RunSdSweep(const SdSweepRequest& request, const model::PresetStore& store);

}  // namespace moelab::plan
