#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "model/cost_source.h"
#include "model/model_spec.h"
#include "sim/serving_simulator.h"

namespace moelab::sim {

// The time of one serving iteration's mixed batch from a CostSource, whose Forward takes a
// uniform shape (B sequences x t tokens at one context). An iteration runs D decodes (1 token
// each, or gamma + 1 with SD, at their own contexts c_i) and P prefill chunks (t_j tokens at
// contexts c_j) as one pass of T = sum of tokens, so it is composed (docs/serving-sim.md):
//   weight-streaming operators (projections, router, routed and shared experts, dense FFN, norms,
//     embedding, tensor-parallel communication) read their weights once for the T tokens: priced
//     by Forward(batch T, 1 token, context 0); the routed experts with the distinct experts of T
//     tokens (uniform N(T), the same for any split of T into sequences);
//   the LM head runs only for the rows that emit a token (the decodes and the chunks that end a
//     prefill): Forward(batch L, 1 token).lm_head;
//   the attention core over the KV cache per group: the decodes as one batched call at their mean
//     context, Forward(batch D, tokens d, context mean c_i) (its FLOPs and KV bytes are linear in
//     the context, so the mean prices the sum), and each prefill chunk at its own context,
//     Forward(batch 1, t_j, c_j, last-position logits);
//   plus `iteration_overhead_s` (the scheduler and launch time one iteration adds; no profile
//     measures it yet, so it is an option, default 0).
// A fitted-profile source measures attention whole (projections and core, Operator::kAttention):
// it is priced per group like the core, so its projections are counted per group, not once.
// Forward results are memoized by shape: a simulation asks for few distinct ones.
class CostSourceIterationPricer : public IterationPricer {
 public:
  CostSourceIterationPricer(std::shared_ptr<const model::CostSource> source,
                            model::MoeModelSpec model, double iteration_overhead_s);
  double Seconds(const scheduler::IterationPlan& plan) override;
  // --routing: the routed experts of an iteration's T tokens are the distinct experts `routing`
  // gives T tokens of T sequences (model::ExpertActivation, as plan sd prices passes) instead of
  // uniform N(T); null: uniform. Held, not owned; set before the first Seconds. It is the
  // expectation over routings (exact for single tokens: routing/independent_tokens.h), not one
  // sampled routing per iteration: the expert cost is linear in it, so the mean iteration's time
  // is priced exactly, with no routing noise uniform routing's N(T) lacks (docs/serving-sim.md).
  void RouteBy(const model::ExpertActivation* routing) { routing_ = routing; }

  // {"weight_streaming_s", "lm_head_s", "attention_s", "overhead_s"} summed over the iterations
  // priced so far: where the simulated time went.
  nlohmann::json Breakdown() const;

 private:
  double WeightStreamingSeconds(int64_t tokens);
  double LmHeadSeconds(int64_t rows);
  double AttentionSeconds(int64_t batch, int64_t tokens, int64_t context, bool decode);

  std::shared_ptr<const model::CostSource> source_;
  model::MoeModelSpec model_;
  double iteration_overhead_s_;
  const model::ExpertActivation* routing_ = nullptr;
  std::unordered_map<int64_t, double> weight_streaming_s_, lm_head_s_;
  std::unordered_map<uint64_t, double> attention_s_;
  double total_weight_s_ = 0, total_lm_head_s_ = 0, total_attention_s_ = 0, total_overhead_s_ = 0;
};

}  // namespace moelab::sim
