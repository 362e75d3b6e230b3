#include "plan/offload_sweep.h"

#include <memory>

#include "base/error.h"
#include "base/message_text.h"
#include "policies/registry.h"

namespace moelab::plan {

fit::OffloadSources ApplyCostSources(fit::CostSources& sources, sim::SimConfig& config) {
  fit::OffloadSources chosen =
      sources.ForOffload(config.model, config.hardware, config.cpu_threads);
  config.model = chosen.model;
  config.accelerator_costs = chosen.accelerator;
  config.host_costs = chosen.host;
  return chosen;
}

void OffloadSweepRequest::Validate() const {
  if (memory_bytes.empty()) throw base::Error("--memory list is empty");
  for (double bytes : memory_bytes) {
    if (!(bytes > 0))
      throw base::Error("--memory values must be > 0 GB, got " + std::to_string(bytes / 1e9));
  }
  for (const std::string& name : policies)
    policies::DefaultPolicyRegistry().Find(name);  // lists the valid ones
  cost.Validate();
  base.Validate();
}

OffloadSweepResult SweepOffload(const OffloadSweepRequest& request,
                                const model::PresetStore& store) {
  request.Validate();
  OffloadSweepResult result;
  result.base = request.base;
  result.memory_bytes = request.memory_bytes;
  result.policies =
      request.policies.empty() ? policies::DefaultPolicyRegistry().Names() : request.policies;
  fit::CostSources sources(request.cost, store);
  result.calibrations = ApplyCostSources(sources, result.base).calibrations;
  for (double bytes : result.memory_bytes) {
    for (const std::string& name : result.policies) {
      sim::SimConfig config = result.base;
      config.policy = name;
      config.accelerator_bytes = bytes;
      OffloadSweepCell cell{bytes, name, std::nullopt, ""};
      try {
        cell.result = sim::SimulateOffload(config);
      } catch (const base::Error& e) {
        // A configuration the policy cannot run at this size (e.g. too little memory for its
        // cache), in this command's words: the policies name the simulator's options, and here
        // the memory is --memory's and the policy's other options are its defaults.
        cell.error = base::Reworded(
            e.what(), {{"raise --accelerator-memory or lower --staging-buffers",
                        "raise --memory (or lower --staging-buffers in moelab sim offload)"},
                       {"--accelerator-memory", "--memory"}});
      }
      result.cells.push_back(std::move(cell));
    }
  }
  return result;
}

OffloadRunResult RunOffload(sim::SimConfig config, const fit::CostSourceOptions& cost,
                            const model::PresetStore& store) {
  fit::CostSources sources(cost, store);
  fit::OffloadSources chosen = ApplyCostSources(sources, config);
  sim::SimResult result = sim::SimulateOffload(config);
  return {std::move(config), std::move(result), std::move(chosen.calibrations),
          chosen.accelerator_params, chosen.host_params};
}

}  // namespace moelab::plan
