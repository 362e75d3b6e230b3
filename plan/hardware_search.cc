#include "plan/hardware_search.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "fit/cost_calibration.h"
#include "fit/cost_source_options.h"
#include "model/cost_source.h"
#include "plan/sd_sweep.h"

namespace moelab::plan {

void HardwareSearchRequest::Validate() const {
  if (!tpot_max_s && !ttft_max_s) throw base::Error("give --tpot-max and/or --ttft-max");
  if ((tpot_max_s && !(*tpot_max_s > 0)) || (ttft_max_s && !(*ttft_max_s > 0))) {
    throw base::Error("--tpot-max and --ttft-max must be > 0 seconds");
  }
  if (batch < 1 || prompt < 1 || context < 0)
    throw base::Error("--batch and --prompt must be >= 1, --context >= 0");
  if (device_counts.empty()) throw base::Error("--devices list is empty");
  if (cost.fitted_profile)
    throw base::Error("plan hardware compares presets: give --calibrate, not --profile");
  cost.Validate();
}

HardwareSearchResult SearchHardware(const HardwareSearchRequest& request,
                                    const model::PresetStore& store) {
  request.Validate();
  HardwareSearchResult result;
  result.request = request;
  result.model = store.LoadModel(request.model);
  const model::MoeModelSpec& model = result.model;
  // As sim offload refuses it: a prompt or context past the model's positions has no answer.
  for (const auto& [option, tokens] :
       {std::pair{"--prompt", request.prompt}, std::pair{"--context", request.context}}) {
    if (model.max_position_embeddings > 0 && tokens > model.max_position_embeddings) {
      throw base::Error(std::string(option) + " " + std::to_string(tokens) + " exceeds model '" +
                        model.name + "''s " + std::to_string(model.max_position_embeddings) +
                        " positions (max_position_embeddings)");
    }
  }
  const std::shared_ptr<const model::ExpertActivation> routing =
      TargetRouting(request.routing, model, request.routing_seed);
  result.routing = model::DescribeActivation(routing.get());
  const double tpot_max = request.tpot_max_s.value_or(INFINITY);
  const double ttft_max = request.ttft_max_s.value_or(INFINITY);

  auto evaluate = [&](const std::string& name, const model::CostSource& source, int64_t count,
                      double memory_bytes) {
    const double kv_tokens = static_cast<double>(request.batch) *
                             static_cast<double>(std::max(request.context, request.prompt) + 1);
    HardwareCandidate c{name, count, memory_bytes, source.Memory(model, kv_tokens).fits(),
                        {},   {},    false,        source.name()};
    if (c.fits) {
      c.tpot_s =
          source.Forward(model, {request.batch, 1, request.context, true, routing.get()}).time_s;
      c.ttft_s =
          source.Forward(model, {request.batch, request.prompt, 0, false, routing.get()}).time_s;
      c.meets = *c.tpot_s <= tpot_max && *c.ttft_s <= ttft_max;
    }
    result.candidates.push_back(c);
  };

  fit::CostSources sources(request.cost, store);
  model::CostParameters accelerator_params = request.cost.assumed;
  std::optional<fit::CostCalibration> accelerator_calibration;
  result.cost_source = fit::CostSources::RooflineName(false);
  if (sources.calibrated()) {
    const fit::Profile& profile = sources.CalibrationProfile();
    const std::optional<model::HardwareSpec> profiled =
        request.cost.profiled_hardware
            ? std::optional(store.LoadHardware(*request.cost.profiled_hardware))
            : std::nullopt;
    bool used = false;
    if (sources.CalibrationProfileHas("gpu")) {
      if (!profiled || !profiled->has_accelerator()) {
        throw base::Error(profile.origin +
                          " has GPU samples: name the accelerator they were measured on with "
                          "--profiled-hardware");
      }
      result.calibrations.push_back(sources.Calibrate("gpu", *profiled));
      accelerator_calibration = result.calibrations.back();
      accelerator_params = accelerator_calibration->params;
      result.cost_source = fit::CostSources::RooflineName(true);
      used = true;
    }
    if (sources.CalibrationProfileHas("cpu") &&
        (profile.limits || (profiled && !profiled->has_accelerator()))) {
      const model::HardwareSpec machine =
          profiled && !profiled->has_accelerator() ? *profiled : fit::HardwareFromProfile(profile);
      result.calibrations.push_back(sources.Calibrate("cpu", machine));
      const fit::CostCalibration& calibration = result.calibrations.back();
      const auto source = fit::CostSources::Roofline(
          model::ComputeTargetOf(machine, request.cost.assumed.compute_dtype), calibration.params,
          &calibration);
      evaluate(machine.name, *source, 0, machine.host->dram_bytes);
      used = true;
    }
    if (!used) {
      throw base::Error(
          profile.origin +
          ": nothing to calibrate: no GPU samples, and its CPU samples have no measured "
          "limits (machine.limits) or host --profiled-hardware to judge them against");
    }
  }
  for (const model::PresetEntry& entry : store.ListHardware()) {
    if (entry.kind != "accelerator") continue;
    for (int64_t count : request.device_counts) {
      const std::string name = count == 1 ? entry.name : std::to_string(count) + "x" + entry.name;
      const model::HardwareSpec hardware = store.LoadHardware(name);
      const auto source = fit::CostSources::Roofline(
          model::ComputeTargetOf(hardware, accelerator_params.compute_dtype), accelerator_params,
          accelerator_calibration ? &*accelerator_calibration : nullptr);
      evaluate(name, *source, count,
               hardware.accelerator->memory_bytes * static_cast<double>(count));
    }
  }
  std::stable_sort(result.candidates.begin(), result.candidates.end(),
                   [](const HardwareCandidate& a, const HardwareCandidate& b) {
                     return a.memory_bytes != b.memory_bytes ? a.memory_bytes < b.memory_bytes
                                                             : a.devices < b.devices;
                   });
  for (const HardwareCandidate& c : result.candidates) {
    if (c.meets) {
      result.smallest = c.hardware;
      break;
    }
  }
  return result;
}

}  // namespace moelab::plan
