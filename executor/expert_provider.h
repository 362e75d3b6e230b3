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

}  // namespace moelab::executor
