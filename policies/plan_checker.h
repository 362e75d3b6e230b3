#pragma once

#include <optional>
#include <span>
#include <string>

#include "policies/expert_residency.h"
#include "policies/memory_plan.h"
#include "policies/offload_policy.h"

namespace moelab::policies {

// Checks a policy's plans against the residency its earlier decisions left, and applies them:
// the contract of offload_policy.h enforced the same way by every engine (the simulator now, the
// executor's offload runtime next). A violation is a policy bug, reported as moelab::Error
// "policy 'NAME': WHAT (a policy bug)": a resident call on an absent expert, a promotion of an
// expert that is not staged, an eviction of an expert that is not cached, a fetch or prefetch of
// an expert already there, more cached experts than the policy's own slots, more staging buffers
// released than reserved, an expert outside the model, a plan whose decisions do not follow the
// demand.
//
// Call order mirrors the engine's: PlaceInitial for each expert of InitialPlacement() then
// EndInitialPlacement; per pass CheckIterationPlan; per layer CheckDecisionCount, ApplyDiscard for
// each staged expert dropped, CheckDecisionOrder, ApplyDecision per decision (plain hits first),
// ApplyPrefetch per prefetch. The Apply calls return what the engine must carry out.
class PlanChecker {
 public:
  PlanChecker(std::string policy_name, int64_t moe_layers, int64_t experts_per_layer,
              int64_t expert_slots, int64_t staging_buffers);

  [[noreturn, gnu::cold]] void Bug(const std::string& what) const;

  // The policy's slots and staging buffers must fit the plan unless it ignores the limit.
  void CheckMemory(const MemoryPlan& plan, bool ignores_memory_limit) const;

  void PlaceInitial(ExpertRef ref);
  void EndInitialPlacement() const;

  void CheckIterationPlan(const LayerPlan& plan) const;  // prefetches only
  // Inline, the messages out of line: called for every layer.
  void CheckDecisionCount(std::span<const ExpertDemand> demand, const LayerPlan& plan) const {
    if (plan.decisions.size() != demand.size()) [[unlikely]]
      BadDecisionCount(demand.size(), plan.decisions.size());
  }
  void CheckDecisionOrder(std::span<const ExpertDemand> demand, const LayerPlan& plan) const {
    for (size_t i = 0; i < demand.size(); ++i) {
      if (plan.decisions[i].expert != demand[i].expert) [[unlikely]]
        Bug("decisions out of the demand's order");
    }
  }

  // What carrying out one decision or prefetch changes, for the engine to schedule.
  struct Effects {
    // A cached expert whose slot is taken: its pending computation and copy must finish before
    // the slot is overwritten.
    std::optional<ExpertRef> evicted;
    bool evicted_unused_prefetch = false;  // the evicted expert was prefetched, never used
    bool used_prefetch = false;            // the decided expert's prefetch is used now
  };
  Effects ApplyDecision(int32_t layer, const ExpertDecision& decision);
  Effects ApplyPrefetch(const PrefetchRequest& request);
  // Drops a staged expert (its buffer freed); true when it was prefetched and never used.
  bool ApplyDiscard(ExpertRef ref);

  const ExpertResidency& residency() const { return residency_; }

 private:
  [[noreturn, gnu::cold, gnu::noinline]] void BadDecisionCount(size_t demanded,
                                                               size_t planned) const;
  Effects Evict(ExpertRef ref, const char* why);
  void ReserveSlot();
  void AcquireStagingBuffer();
  void ReleaseStagingBuffer();
  std::string Name(ExpertRef ref) const;

  std::string policy_;
  int64_t expert_slots_, staging_buffers_;
  ExpertResidency residency_;
  // Free staging buffers minus copies waiting for one (a copy may wait: not a bug).
  int64_t staging_balance_;
};

}  // namespace moelab::policies
