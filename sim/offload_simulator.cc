// The simulator's public entry: SimConfig::Validate and SimulateOffload (the engine is in
// engine.h and its engine_*.cc files).
#include "sim/offload_simulator.h"

#include <cmath>
#include <memory>

#include "base/error.h"
#include "base/limits.h"
#include "sim/engine.h"

namespace moelab::sim {

void SimConfig::Validate() const {
  model::ValidateModelSpec(model, model.name);
  if (!model.is_moe())
    throw base::Error("--model " + model.name + ": a dense model has no experts to offload");
  if (!(kv_bits > 0 && kv_bits <= 32) || !(activation_bits > 0 && activation_bits <= 32))
    throw base::Error("sim: kv_bits and activation_bits must be in (0, 32]");
  workload.Validate();
  calibration.Validate();
  if (accelerator_bytes && !(*accelerator_bytes > 0 && std::isfinite(*accelerator_bytes))) {
    throw base::Error("--accelerator-memory must be a positive size");
  }
  if (cpu_threads < 0)
    throw base::Error("--cpu-threads must be >= 0 (0: all cores), got " +
                      std::to_string(cpu_threads));
  base::CheckCount(cpu_threads, 0, base::kMaxThreads, "--cpu-threads",
                   "threads of a host, as --threads elsewhere");
  base::CheckSeconds(layer_overhead_s, "--layer-overhead-s");
  if (model.max_position_embeddings > 0 &&
      workload.prompt_tokens + workload.output_tokens > model.max_position_embeddings) {
    throw base::Error("--prompt " + std::to_string(workload.prompt_tokens) + " plus --tokens " +
                      std::to_string(workload.output_tokens) + " exceed model '" + model.name +
                      "''s " + std::to_string(model.max_position_embeddings) +
                      " positions (max_position_embeddings)");
  }
}

SimResult SimulateOffload(const SimConfig& config, routing::RoutingSource& routing,
                          const policies::RoutingCalibration& calibration) {
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
  const model::MoeModelSpec& model = config.model;
  const routing::RoutingSpec& routing_spec = config.routing;
  std::unique_ptr<routing::RoutingSource> routing = routing::MakeRoutingSource(
      routing_spec, model.num_moe_layers(), model.moe->num_experts, model.moe->top_k, config.seed);
  if (!routing) {
    throw base::Error(
        "--routing gate: the simulator has no model gate; use uniform, popularity:FILE, "
        "correlated:... or trace:FILE");
  }
  const policies::RoutingCalibration calibration =
      policies::CalibrateRouting(routing_spec, model.num_moe_layers(), model.moe->num_experts,
                                 model.moe->top_k, config.seed, config.calibration);
  return SimulateOffload(config, *routing, calibration);
}

}  // namespace moelab::sim
