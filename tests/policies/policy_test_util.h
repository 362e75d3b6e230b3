#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"
#include "policies/offload_policy.h"
#include "tests/support/error_of.h"

namespace moelab::testing {

// A setup with unit-sized experts (1000 bytes) and no dense weights, so accelerator memory is
// exactly `slots` expert slots plus `staging` staging buffers.
inline policies::OffloadSetup TinySetup(int64_t moe_layers, int64_t experts, int64_t top_k,
                                        int64_t slots, int64_t staging = 0) {
  policies::OffloadSetup setup;
  setup.num_layers = moe_layers;
  setup.num_moe_layers = moe_layers;
  setup.num_experts = experts;
  setup.top_k = top_k;
  setup.expert_bytes = 1000;
  setup.accelerator_bytes = 1000.0 * static_cast<double>(slots + staging);
  setup.dense_layer_bytes.assign(static_cast<size_t>(moe_layers), 0.0);
  setup.latency = {0.005, 0.0001, 0.0005, 0.014};
  return setup;
}

// One layer's demand: experts with their token counts.
struct Demand {
  Demand(int32_t layer_index, std::vector<policies::ExpertDemand> demanded,
         std::vector<float> next = {}, std::vector<float> gate_probabilities = {})
      : layer(layer_index),
        experts(std::move(demanded)),
        next_scores(std::move(next)),
        gate(std::move(gate_probabilities)) {}

  int32_t layer = 0;
  std::vector<policies::ExpertDemand> experts;
  std::vector<float> next_scores;
  std::vector<float> gate;
  int64_t tokens = 1;

  policies::LayerDemand View() const {
    policies::LayerDemand demand;
    demand.layer = layer;
    demand.tokens = tokens;
    demand.experts = experts;
    demand.next_layer_scores = next_scores;
    demand.gate_probabilities = gate;
    return demand;
  }
};

inline policies::LayerPlan Plan(policies::OffloadPolicy& policy, const Demand& demand) {
  policies::LayerPlan plan;
  policy.PlanLayer(demand.View(), plan);
  return plan;
}

}  // namespace moelab::testing

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)
