// The simulator's public entry: SimConfig::Validate and SimulateOffload (the engine is in
// engine.h and its engine_*.cc files).
#include "sim/offload_simulator.h"

#include <cmath>
#include <memory>

#include "base/error.h"
#include "sim/engine.h"

namespace moelab::sim {

void SimConfig::Validate() const {
  ValidateModelSpec(model, model.name);
  if (!model.is_moe())
    throw Error("--model " + model.name + ": a dense model has no experts to offload");
  cost.Validate();
  workload.Validate();
  calibration.Validate();
  if (accelerator_bytes && !(*accelerator_bytes > 0 && std::isfinite(*accelerator_bytes))) {
    throw Error("--accelerator-memory must be a positive size");
  }
  if (cpu_threads < 0)
    throw Error("--cpu-threads must be >= 0 (0: all cores), got " + std::to_string(cpu_threads));
  if (model.max_position_embeddings > 0 &&
      workload.prompt_tokens + workload.output_tokens > model.max_position_embeddings) {
    throw Error("--prompt " + std::to_string(workload.prompt_tokens) + " plus --tokens " +
                std::to_string(workload.output_tokens) + " exceed model '" + model.name + "''s " +
                std::to_string(model.max_position_embeddings) +
                " positions (max_position_embeddings)");
  }
}

SimResult SimulateOffload(const SimConfig& config, RoutingSource& routing,
                          const RoutingCalibration& calibration) {
  config.Validate();
  SimResult result;
  result.model = config.model.name;
  result.hardware = config.hardware.name;
  result.policy = config.policy;
  result.routing = routing.Describe();
  result.calibration_source = calibration.source;
  result.calibration_in_sample = calibration.in_sample;
  result.workload = config.workload;
  result.seed = config.seed;
  Engine engine(config, routing, calibration, result);
  engine.Run();
  return result;
}

SimResult SimulateOffload(const SimConfig& config) {
  config.Validate();
  const MoeModelSpec& model = config.model;
  const RoutingSpec& routing_spec = config.routing;
  std::unique_ptr<RoutingSource> routing = MakeRoutingSource(
      routing_spec, model.num_moe_layers(), model.moe->num_experts, model.moe->top_k, config.seed);
  if (!routing) {
    throw Error(
        "--routing gate: the simulator has no model gate; use uniform, popularity:FILE, "
        "correlated:... or trace:FILE");
  }
  const RoutingCalibration calibration =
      CalibrateRouting(routing_spec, model.num_moe_layers(), model.moe->num_experts,
                       model.moe->top_k, config.seed, config.calibration);
  return SimulateOffload(config, *routing, calibration);
}

}  // namespace moelab::sim
