#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "sim/serving_iteration_cost.h"

namespace moelab::sim {

// One serving iteration with speculative decoding (fixed gamma), as the engine runs it
// (executor/serving_core.h): the draft model's passes, then the target's one pass in which every
// decode verifies its d = gamma + 1 positions (fewer near max_tokens) beside the prefill chunks.
//   verify: the plan as it is, priced by `verify` (decodes of d tokens: the LM head on every
//     verified row, attention of d tokens at the decodes' mean context);
//   draft: `draft` (a CostSourceIterationPricer of the draft model, no overhead) prices its first
//     pass as the plan with each drafting decode as 1 token (the engine feeds the pending token;
//     2 after a round that accepted every draft: priced as 1) beside the same prefill chunks (the
//     draft prefills what the target prefills), then one decode-only pass per further draft step
//     over the decodes that still draft, at their contexts plus the drafts so far.
class SpeculativeIterationPricer : public IterationPricer {
 public:
  SpeculativeIterationPricer(std::unique_ptr<CostSourceIterationPricer> verify,
                             std::unique_ptr<CostSourceIterationPricer> draft);
  double Seconds(const scheduler::IterationPlan& plan) override;

  // The verify pricer's breakdown plus "draft_s": the draft passes' time.
  nlohmann::json Breakdown() const;

 private:
  std::unique_ptr<CostSourceIterationPricer> verify_, draft_;
  scheduler::IterationPlan step_;  // reused: a draft pass's plan
  double draft_s_ = 0;
};

}  // namespace moelab::sim
