#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fit/cost_calibration.h"
#include "model/preset_store.h"
#include "fit/cost_source_options.h"
#include "sim/offload_simulator.h"

namespace moelab::plan {

// Prices the offload simulator's two devices from the chosen source (fit::CostSources::
// ForOffload): sets config's sources and, with --profile, its model to the shape the profile
// measured. Returns what was chosen (the rooflines' parameters, the calibrations made).
fit::OffloadSources ApplyCostSources(fit::CostSources& sources, sim::SimConfig& config);

// `moelab plan offload`: each policy's TPOT (TTFT, hit rate) across accelerator memory sizes.
struct OffloadSweepRequest {
  sim::SimConfig base;                // model, hardware, workload, routing, seed
  std::vector<double> memory_bytes;   // accelerator memory sizes to try
  std::vector<std::string> policies;  // empty: every registered policy
  fit::CostSourceOptions cost;

  void Validate() const;
};

struct OffloadSweepCell {
  double memory_bytes = 0;
  std::string policy;
  std::optional<sim::SimResult> result;  // absent when the policy cannot run at this size
  std::string error;                     // why not
};

struct OffloadSweepResult {
  sim::SimConfig base;  // with the cost sources applied
  std::vector<std::string> policies;
  std::vector<double> memory_bytes;
  std::vector<OffloadSweepCell> cells;  // memory-major, policies in order
  std::vector<fit::CostCalibration> calibrations;
};

OffloadSweepResult SweepOffload(const OffloadSweepRequest& request,
                                const model::PresetStore& store);

// `moelab sim offload`: one simulation of `config` (model, hardware, policy, workload, ...) with
// its devices priced from `cost` (ApplyCostSources).
struct OffloadRunResult {
  sim::SimConfig config;  // with the cost sources applied
  sim::SimResult result;
  std::vector<fit::CostCalibration> calibrations;
  // The rooflines' parameters: the accelerator's, the host's where a profile calibrated it apart.
  model::CostParameters cost_parameters;
  std::optional<model::CostParameters> host_cost_parameters;
};
OffloadRunResult RunOffload(sim::SimConfig config, const fit::CostSourceOptions& cost,
                            const model::PresetStore& store);

}  // namespace moelab::plan
