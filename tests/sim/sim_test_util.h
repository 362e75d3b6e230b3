#pragma once

#include <string>

#include "model/preset_store.h"
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

inline std::string MixtralPopularity() {
  return (SharedDataDir() / "routing/mixtral-8x7b/fiddler_mixtral_popularity_aggregated.csv")
      .string();
}

}  // namespace moelab::testing
