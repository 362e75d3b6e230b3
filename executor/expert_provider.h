#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/weights.h"
#include "policies/offload_policy.h"

namespace moelab::executor {

// Where a forward pass gets its routed experts' weights when they do not all live in RAM (the
// offload runtime, executor/offload/). The transformer tells it each MoE layer's routing, then
// acquires the weights expert by expert (blocking until a read lands) and releases them after
// the computation. Without a provider the transformer uses ModelWeights' own experts.
class ExpertProvider {
 public:
  virtual ~ExpertProvider() = default;
  // What the transformer must compute for PlanLayer (each costs a router evaluation).
  virtual policies::PolicyNeeds Needs() const = 0;
  virtual void BeginPass(const std::string& kind, int64_t tokens, int64_t sequences) = 0;
  // The layer's routing is known (demand: activated experts, ascending); fills `run_order` with
  // the demand's experts in the order to compute them.
  virtual void PlanLayer(const policies::LayerDemand& demand, std::vector<int32_t>& run_order) = 0;
  virtual const FfnWeights& Acquire(int32_t moe_layer, int32_t expert) = 0;
  virtual void Release(int32_t moe_layer, int32_t expert) = 0;
  virtual void EndPass() = 0;
};

// A layer's demand for its provider: the experts with tokens (ascending) and their token counts.
inline void ExpertDemandOf(const std::vector<int64_t>& tokens_per_expert,
                           std::vector<policies::ExpertDemand>& demand) {
  demand.clear();
  for (size_t e = 0; e < tokens_per_expert.size(); ++e) {
    if (tokens_per_expert[e] > 0) demand.push_back({static_cast<int32_t>(e), tokens_per_expert[e]});
  }
}

// The gate's mean probabilities over a pass's tokens (probabilities [tokens][experts]).
inline void GateMeanOf(const float* probabilities, int64_t tokens, int64_t experts,
                       std::vector<float>& mean) {
  mean.assign(static_cast<size_t>(experts), 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e)
      mean[e] += probabilities[t * experts + e] / static_cast<float>(tokens);
  }
}

// The speculative gate's scores: the next layer's softmax probabilities [tokens][experts] summed
// over the pass's tokens.
inline void NextLayerScoresOf(const float* probabilities, int64_t tokens, int64_t experts,
                              std::vector<float>& scores) {
  scores.assign(static_cast<size_t>(experts), 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) scores[e] += probabilities[t * experts + e];
  }
}

}  // namespace moelab::executor
