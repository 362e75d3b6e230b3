#pragma once

#include <cmath>
#include <string>

#include "fit/cost_source_options.h"
#include "model/cost_source.h"
#include "model/preset_store.h"
#include "sim/cost_model.h"
#include "sim/offload_simulator.h"
#include "tests/support/test_paths.h"

namespace moelab::testing {

inline const model::PresetStore& Presets() {
  static const model::PresetStore store(PresetDir());
  return store;
}

// A small decode run of `model` on `hardware` with `policy`; callers adjust the rest.
inline sim::SimConfig SimConfigFor(const std::string& model, const std::string& hardware,
                                   const std::string& policy) {
  sim::SimConfig config;
  config.model = Presets().LoadModel(model);
  config.hardware = Presets().LoadHardware(hardware);
  config.policy = policy;
  config.workload.prompt_tokens = 16;
  config.workload.output_tokens = 6;
  config.seed = 5;
  config.calibration.tokens = 512;
  return config;
}

// `config` simulated with the analytic rooflines (what --hardware alone gives:
// fit::AnalyticOffloadSources) pricing the devices it leaves without a source.
inline sim::SimResult Simulate(sim::SimConfig config) {
  const fit::OffloadSources analytic = fit::AnalyticOffloadSources(
      config.model, config.hardware, config.cpu_threads, model::CostParameters{});
  if (!config.accelerator_costs) config.accelerator_costs = analytic.accelerator;
  if (!config.host_costs) config.host_costs = analytic.host;
  return sim::SimulateOffload(config);
}

// The simulator's cost model with the analytic rooflines of `hardware`'s accelerator (`params`)
// and host on `cpu_threads` threads (`host_params`).
inline sim::CostModel RooflineCostModel(const model::MoeModelSpec& model,
                                        const model::HardwareSpec& hardware,
                                        const model::CostParameters& params,
                                        const model::CostParameters& host_params,
                                        int64_t cpu_threads) {
  const fit::OffloadSources sources =
      fit::AnalyticOffloadSources(model, hardware, cpu_threads, params, host_params);
  return sim::CostModel(model, hardware, cpu_threads, sources.accelerator, sources.host);
}

// A cost source whose times say the working set each call was priced in: an expert of t tokens
// takes t + W seconds, a pass's attention 1 + W; beyond every cache (DRAM, W infinite) counts as
// W = 1e12, more than any model's, so the times stay finite.
class WorkingSetProbe : public model::CostSource {
 public:
  static constexpr double kBeyondEveryCacheBytes = 1e12;
  static double Bytes(double working_set_bytes) {
    return std::isinf(working_set_bytes) ? kBeyondEveryCacheBytes : working_set_bytes;
  }
  std::string name() const override { return "probe"; }
  std::string device() const override { return "probe"; }
  std::string compute_dtype() const override { return "bf16"; }
  model::ForwardCost Forward(const model::MoeModelSpec&,
                             const model::ForwardShape& shape) const override {
    model::ForwardCost cost;
    cost.Add(model::Operator::kAttention, 0, 0, 1.0 + Bytes(shape.working_set_bytes));
    cost.Total();
    return cost;
  }
  double ExpertSeconds(const model::MoeModelSpec&, int64_t tokens,
                       double working_set_bytes) const override {
    return static_cast<double>(tokens) + Bytes(working_set_bytes);
  }
  double RejectSeconds(const model::MoeModelSpec&, int64_t, int64_t) const override { return 0; }
  model::MemoryFootprint Memory(const model::MoeModelSpec&, double) const override { return {}; }
  nlohmann::json Describe() const override { return {{"cost_source", "probe"}}; }
};

inline std::string MixtralPopularity() {
  return (SharedDataDir() / "routing/mixtral-8x7b/fiddler_mixtral_popularity_aggregated.csv")
      .string();
}

}  // namespace moelab::testing
