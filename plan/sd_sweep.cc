#include "plan/sd_sweep.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "fit/fit_json.h"
#include "fit/predict.h"
#include "model/executor_shape.h"
#include "routing/expert_activation_sampler.h"

namespace moelab::plan {
namespace {

std::string FormatLevel(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.4f", value);
  return text;
}

}  // namespace

std::shared_ptr<const model::ExpertActivation> TargetRouting(const routing::RoutingSpec& routing,
                                                             const model::MoeModelSpec& target,
                                                             uint64_t seed) {
  if (routing.kind == routing::RoutingSpec::Kind::kUniform) return nullptr;
  if (!target.moe) {
    throw base::Error("--routing " + routing.text + ": the target '" + target.name +
                      "' is dense (it routes no experts)");
  }
  return routing::MakeExpertActivation(routing, target.num_moe_layers(), target.moe->num_experts,
                                       target.moe->top_k, seed);
}

void SdSweepRequest::Validate() const {
  if (levels.empty())
    throw base::Error(std::string("--") + (by_sigma ? "sigma" : "alpha") + " list is empty");
  for (double level : levels) {
    if (by_sigma ? !(level > 0 && level <= 1) : !(level >= 0 && level < 1)) {
      throw base::Error(
          std::string("--") + (by_sigma ? "sigma" : "alpha") + " value " + FormatLevel(level) +
          (by_sigma ? ": expected a number in (0, 1]" : ": expected a number in [0, 1)"));
    }
  }
  plan.Validate();
  cost.Validate();
}

std::optional<double> SdSweepResult::MoesdSpeedup(const model::SdPlanRow& row) const {
  if (!sd_fit || !target.moe) return std::nullopt;
  return fit::PredictSpeedup(*sd_fit, model::SdPoint{row.batch, row.gamma, target.moe->top_k,
                                                     target.moe->num_experts, row.sigma});
}

SdSweepResult RunSdSweep(const SdSweepRequest& request, const model::PresetStore& store) {
  request.Validate();
  SdSweepResult result;
  result.by_sigma = request.by_sigma;
  result.plan = request.plan;
  result.target = store.LoadModel(request.model);
  result.draft = store.LoadModel(request.draft);
  fit::CostSources sources(request.cost, store);
  if (sources.fitted()) {
    result.target = sources.ProfiledTarget(result.target);
    sources.RequireProfiledDraft(result.draft);
    result.draft = model::ExecutorDraftShape(result.draft, result.target);
    result.source = sources.Fitted(result.target);
    result.hardware = "profile:" + *request.cost.fitted_profile;
    result.display_name = result.hardware;
  } else {
    const model::HardwareSpec hardware = store.LoadHardware(request.cost.hardware);
    result.source = sources.ForHardware(hardware);
    result.hardware = hardware.name;
    result.display_name = hardware.display_name;
    if (!sources.calibrations().empty()) result.calibration = sources.calibrations().front();
  }
  if (request.sd_fit) {
    result.sd_fit = fit::LoadSdFit(*request.sd_fit);
    result.sd_fit_path = *request.sd_fit;
  }
  // As sim offload and plan hardware refuse it: a step past a model's positions has no answer.
  // Both models cache the context and verify (or draft) up to gamma + 1 positions after it.
  const int64_t positions =
      request.plan.context_length +
      *std::max_element(request.plan.gammas.begin(), request.plan.gammas.end()) + 1;
  for (const model::MoeModelSpec* spec : {&result.target, &result.draft}) {
    if (spec->max_position_embeddings > 0 && positions > spec->max_position_embeddings) {
      throw base::Error("--context " + std::to_string(request.plan.context_length) +
                        " plus the largest --gamma + 1 (" + std::to_string(positions) +
                        " positions) exceed model '" + spec->name + "''s " +
                        std::to_string(spec->max_position_embeddings) +
                        " positions (max_position_embeddings)");
    }
  }
  result.target_routing = TargetRouting(request.routing, result.target, request.routing_seed);
  model::SdStepCosts costs(*result.source, result.target, result.draft, request.plan.context_length,
                           result.hardware);
  costs.RouteTargetBy(result.target_routing.get());
  for (double level : request.levels) {
    model::SdPlanOptions options = request.plan;
    if (request.by_sigma) {
      options.sigma = level;
    } else {
      options.alpha = level;
    }
    result.levels.push_back({level, model::PlanSpeculativeDecoding(costs, options)});
  }
  return result;
}

}  // namespace moelab::plan
