#include "plan/offload_sweep.h"

#include <memory>

#include "base/error.h"
#include "fit/profile_cost_source.h"
#include "policies/registry.h"

namespace moelab::plan {

std::vector<fit::CostCalibration> ApplyCostSources(CostSources& sources, sim::SimConfig& config) {
  std::vector<fit::CostCalibration> made;
  if (sources.calibrated()) {
    if (sources.CalibrationProfileHas("cpu")) {
      made.push_back(sources.Calibrate("cpu", config.hardware));
      config.host_cost = made.back().params;
    }
    if (sources.CalibrationProfileHas("gpu")) {
      made.push_back(sources.Calibrate("gpu", config.hardware));
      config.cost = made.back().params;
    }
    if (made.empty())
      throw base::Error(sources.CalibrationProfile().origin +
                        ": no cpu or gpu samples to calibrate with");
    config.cost_source = CostSources::RooflineName(true);
  } else if (sources.fitted()) {
    const fit::LatencyFit& fit = sources.Fit();
    // The curves price the layer shapes the profile measured: simulate the shape it recorded.
    config.model = sources.ProfiledTarget(config.model);
    const model::MoeModelSpec& profiled = config.model;
    const bool cpu = fit::FittedProfileCostSource::HasDevice(fit, "cpu");
    const bool gpu = fit::FittedProfileCostSource::HasDevice(fit, "gpu");
    // This machine with its experts on storage (moelab hw from-profile): the CPU is the compute
    // device, so its curves price everything the simulator computes, as validate does -- whatever
    // GPU curves the profile also holds.
    if (config.hardware.compute_device_is_host) {
      if (!cpu) {
        throw base::Error(*sources.options().fitted_profile +
                          ": the fit has no cpu curves, and hardware '" + config.hardware.name +
                          "' computes on its CPU (moelab hw from-profile)");
      }
      config.host_costs = sources.Fitted(profiled, "cpu");
      config.accelerator_costs = config.host_costs;
      config.cost_source = "fitted-profile";
      return made;
    }
    if (cpu) config.host_costs = sources.Fitted(profiled, "cpu");
    if (gpu) config.accelerator_costs = sources.Fitted(profiled, "gpu");
    if (!cpu && !gpu)
      throw base::Error(*sources.options().fitted_profile + ": the fit has no cpu or gpu curves");
    config.cost_source = cpu && gpu ? "fitted-profile"
                         : cpu      ? "fitted-profile (host) + analytic-roofline (accelerator)"
                                    : "fitted-profile (accelerator) + analytic-roofline (host)";
  }
  return made;
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
  CostSources sources(request.cost, store);
  result.calibrations = ApplyCostSources(sources, result.base);
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
        // cache).
        cell.error = e.what();
      }
      result.cells.push_back(std::move(cell));
    }
  }
  return result;
}

OffloadRunResult RunOffload(sim::SimConfig config, const CostSourceOptions& cost,
                            const model::PresetStore& store) {
  config.cost = cost.assumed;
  CostSources sources(cost, store);
  std::vector<fit::CostCalibration> calibrations = ApplyCostSources(sources, config);
  sim::SimResult result = sim::SimulateOffload(config);
  return {std::move(config), std::move(result), std::move(calibrations)};
}

}  // namespace moelab::plan
