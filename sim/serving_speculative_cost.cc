#include "sim/serving_speculative_cost.h"

#include <algorithm>
#include <utility>

namespace moelab::sim {

SpeculativeIterationPricer::SpeculativeIterationPricer(
    std::unique_ptr<CostSourceIterationPricer> verify,
    std::unique_ptr<CostSourceIterationPricer> draft)
    : verify_(std::move(verify)), draft_(std::move(draft)) {}

double SpeculativeIterationPricer::Seconds(const scheduler::IterationPlan& plan) {
  int64_t steps = 0;
  step_.batch.clear();
  for (const scheduler::BatchEntry& entry : plan.batch) {
    if (entry.prefill) {
      step_.batch.push_back(entry);
    } else if (entry.tokens > 1) {
      steps = std::max(steps, entry.tokens - 1);
      step_.batch.push_back({entry.request_id, false, 1, entry.context_tokens, true});
    }
  }
  double draft_s = step_.batch.empty() ? 0 : draft_->Seconds(step_);
  for (int64_t k = 1; k < steps; ++k) {
    step_.batch.clear();
    for (const scheduler::BatchEntry& entry : plan.batch) {
      if (!entry.prefill && entry.tokens - 1 > k)
        step_.batch.push_back({entry.request_id, false, 1, entry.context_tokens + k, true});
    }
    draft_s += draft_->Seconds(step_);
  }
  draft_s_ += draft_s;
  return verify_->Seconds(plan) + draft_s;
}

nlohmann::json SpeculativeIterationPricer::Breakdown() const {
  nlohmann::json breakdown = verify_->Breakdown();
  breakdown["draft_s"] = draft_s_;
  return breakdown;
}

}  // namespace moelab::sim
