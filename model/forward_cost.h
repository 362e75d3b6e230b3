#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/expert_activation.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/roofline.h"

namespace moelab::model {

// Analytic cost of one forward pass, T(model, hardware, batch, tokens_per_sequence,
// context_length), from the roofline of each operator (model/roofline.h, docs/model.md).
// Routed experts follow N(t): t = batch * tokens_per_sequence tokens activate N(t) experts per
// MoE layer (uniform routing, or shape.activation's measured count), whose weights are read once
// each. On a node of g accelerators the
// model is tensor-parallel: each device does 1/g of every operator and two ring all-reduces of the
// hidden states per layer cross the interconnect. Without an accelerator the host CPU computes.

struct ForwardShape {
  int64_t batch = 1;
  int64_t tokens_per_sequence = 1;       // new tokens per sequence in this pass
  int64_t context_length = 0;            // tokens already in each sequence's KV cache
  bool logits_for_all_positions = true;  // false: prefill, logits for the last position only
  // How the pass's tokens route (not owned; outlives the call): nullptr = uniform N(t).
  const ExpertActivation* activation = nullptr;
  // The bytes the run's passes cycle through in memory (model::PassWorkingSetBytes): whether its
  // weights stream from a cache or from DRAM. 0: the whole model resident, with this pass's KV
  // cache. Only a source with a measured cache curve uses it (fit/profile_cost_source.h).
  double working_set_bytes = 0;
  // The pass follows a pass of the same model with no other model's pass between (an SD round's
  // second and later draft passes): its weights may still be in the caches. Only a source with a
  // measured warm pass uses it (fit/profile_cost_source.h); the first draft pass of a round comes
  // after the target's verify pass, which evicts the draft.
  bool after_own_pass = false;
  // Rows whose next tokens are ranked over the whole vocabulary after the pass (a beam search
  // step: each beam's log-softmax and its best candidates, executor/beam_selection.h); 0 for a
  // pass whose tokens are picked from their logits directly.
  int64_t ranked_rows = 0;

  void Validate() const;
};

struct OperatorCost {
  Operator op = Operator::kAttentionProjections;
  std::string name;  // OperatorName(op)
  double flops = 0;  // whole model, all devices
  double bytes = 0;  // weights + KV + activations moved, all devices
  double time_s = 0;
};

struct ForwardCost {
  std::vector<OperatorCost> operators;  // attention_projections, attention_core, router,
                                        // routed_experts, shared_experts, dense_ffn,
                                        // norms_residual, embedding, lm_head, communication,
                                        // beam_selection
  double time_s = 0;
  double flops = 0;
  double bytes = 0;
  double activated_experts_per_layer = 0;  // N(t), 0 for a dense model
  double tokens_per_activated_expert = 0;
  std::string device;         // what computes: accelerator or host display name
  std::string compute_dtype;  // the peak actually used (fallback when the device lacks the type)

  double OperatorTime(Operator op) const;  // 0 when the pass has no such operator
  double OperatorTime(const std::string& name) const;

  // Adds `time_s` (and flops, bytes) to `op`'s entry, creating it in order of first use.
  void Add(Operator op, double flops, double bytes, double time_s);
  // `op`'s entry, created (zero) in order of first use: for adding to it many times.
  OperatorCost& Entry(Operator op);
  // time_s, flops and bytes as the sums over operators.
  void Total();
};

ForwardCost EstimateForwardCost(const MoeModelSpec& model, const HardwareSpec& hardware,
                                const ForwardShape& shape, const CostParameters& params);

// Memory per device for weights plus a KV cache of `kv_tokens` tokens (all sequences).
struct MemoryFootprint {
  double weight_bytes_per_device = 0;
  double kv_bytes_per_device = 0;
  double capacity_bytes_per_device = 0;
  bool fits() const {
    return weight_bytes_per_device + kv_bytes_per_device <= capacity_bytes_per_device;
  }
};

MemoryFootprint EstimateMemory(const MoeModelSpec& model, const HardwareSpec& hardware,
                               double kv_tokens, const CostParameters& params);
MemoryFootprint EstimateMemory(const MoeModelSpec& model, const RooflineTarget& target,
                               double kv_tokens, const CostParameters& params);

// The same on a roofline target already resolved (the host on some of its cores, say).
ForwardCost EstimateForwardCost(const MoeModelSpec& model, const RooflineTarget& target,
                                const ForwardShape& shape, const CostParameters& params);

// The device's ridge point in tokens: peak FLOP/s / bandwidth * (bytes per weight) / 2, the
// token count at which a weight-streaming GEMM turns compute-bound.
double RidgePointTokens(const HardwareSpec& hardware, const CostParameters& params,
                        double weight_bits);

}  // namespace moelab::model
