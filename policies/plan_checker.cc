#include "policies/plan_checker.h"

#include <utility>

#include "base/error.h"

namespace moelab::policies {

PlanChecker::PlanChecker(std::string policy_name, int64_t moe_layers, int64_t experts_per_layer,
                         int64_t expert_slots, int64_t staging_buffers)
    : policy_(std::move(policy_name)),
      expert_slots_(expert_slots),
      staging_buffers_(staging_buffers),
      residency_(moe_layers, experts_per_layer),
      staging_balance_(staging_buffers) {}

void PlanChecker::Bug(const std::string& what) const {
  throw base::Error("policy '" + policy_ + "': " + what + " (a policy bug)");
}

std::string PlanChecker::Name(ExpertRef ref) const {
  return "expert " + std::to_string(ref.expert) + " of MoE layer " + std::to_string(ref.layer);
}

void PlanChecker::CheckMemory(const MemoryPlan& plan, bool ignores_memory_limit) const {
  if (!ignores_memory_limit && !plan.fits_accelerator) {
    Bug("asks for " + std::to_string(plan.expert_slots) + " expert slots and " +
        std::to_string(plan.staging_buffers) + " staging buffers, but accelerator memory holds " +
        std::to_string(plan.available_expert_slots));
  }
}

void PlanChecker::PlaceInitial(ExpertRef ref) {
  if (!residency_.Contains(ref)) Bug("initial placement names an expert outside the model");
  ExpertResidency::Entry& entry = residency_.at(ref);
  if (entry.location == ExpertLocation::kCache)
    Bug("initial placement names " + Name(ref) + " twice");
  entry.location = ExpertLocation::kCache;
  ++residency_.cached();
}

void PlanChecker::EndInitialPlacement() const {
  if (residency_.cached() > expert_slots_) Bug("initial placement exceeds its own expert slots");
}

void PlanChecker::CheckIterationPlan(const LayerPlan& plan) const {
  if (!plan.decisions.empty() || !plan.discard_staged.empty())
    Bug("BeginIteration may only prefetch");
}

void PlanChecker::BadDecisionCount(size_t demanded, size_t planned) const {
  Bug("planned " + std::to_string(planned) + " experts for a demand of " +
      std::to_string(demanded));
}

PlanChecker::Effects PlanChecker::ApplyDecision(int32_t layer, const ExpertDecision& decision) {
  const ExpertRef ref{layer, decision.expert};
  ExpertResidency::Entry& entry = residency_.at(ref);
  Effects effects;
  switch (decision.action) {
    case ExpertAction::kResident:
      if (entry.location == ExpertLocation::kAbsent)
        Bug("runs " + Name(ref) + " as resident, but it is not on the accelerator");
      if (decision.promote) {
        if (entry.location != ExpertLocation::kStaging)
          Bug("promotes " + Name(ref) + ", which is not staged");
        if (decision.evict) {
          effects = Evict(*decision.evict, "promote");  // its slot becomes a staging buffer
        } else {
          ReserveSlot();
        }
        ReleaseStagingBuffer();
        entry.location = ExpertLocation::kCache;
      } else if (decision.evict) {
        Bug("evicts without a fetch or promotion");
      }
      if (entry.unused_prefetch) {
        entry.unused_prefetch = false;
        effects.used_prefetch = true;
      }
      return effects;
    case ExpertAction::kFetch:
      if (entry.location != ExpertLocation::kAbsent)
        Bug("fetches " + Name(ref) + ", which is already on the accelerator");
      if (decision.target == FetchTarget::kCache) {
        if (decision.evict) {
          effects = Evict(*decision.evict, "fetch");
        } else {
          ReserveSlot();
        }
        entry.location = ExpertLocation::kCache;
        return effects;
      }
      if (decision.target != FetchTarget::kTransient) Bug("fetches into a staged buffer on demand");
      if (decision.evict) Bug("evicts for a transient fetch");
      AcquireStagingBuffer();  // run, then released
      ReleaseStagingBuffer();
      return effects;
    case ExpertAction::kCpu:
      if (decision.evict || decision.promote) Bug("evicts or promotes for a CPU run");
      return effects;
  }
  return effects;
}

PlanChecker::Effects PlanChecker::ApplyPrefetch(const PrefetchRequest& request) {
  const ExpertRef ref = request.expert;
  if (!residency_.Contains(ref)) Bug("prefetches an expert outside the model");
  ExpertResidency::Entry& entry = residency_.at(ref);
  if (entry.location != ExpertLocation::kAbsent)
    Bug("prefetches " + Name(ref) + ", which is already there");
  Effects effects;
  bool staging = false;
  if (request.target == FetchTarget::kCache) {
    if (request.evict) {
      effects = Evict(*request.evict, "prefetch");
    } else {
      ReserveSlot();
    }
  } else if (request.target == FetchTarget::kStaged) {
    if (request.evict) Bug("evicts for a staged prefetch (staged experts do not evict)");
    staging = true;
  } else {
    Bug("prefetches into a transient buffer");
  }
  if (staging) AcquireStagingBuffer();
  entry.location = staging ? ExpertLocation::kStaging : ExpertLocation::kCache;
  entry.unused_prefetch = true;
  return effects;
}

bool PlanChecker::ApplyDiscard(ExpertRef ref) {
  if (!residency_.Contains(ref)) Bug("discards an expert outside the model");
  ExpertResidency::Entry& entry = residency_.at(ref);
  if (entry.location != ExpertLocation::kStaging)
    Bug("discards " + Name(ref) + ", which is not staged");
  entry.location = ExpertLocation::kAbsent;
  const bool wasted = entry.unused_prefetch;
  entry.unused_prefetch = false;
  ReleaseStagingBuffer();
  return wasted;
}

PlanChecker::Effects PlanChecker::Evict(ExpertRef ref, const char* why) {
  if (!residency_.Contains(ref))
    Bug(std::string("evicts an expert outside the model (") + why + ")");
  ExpertResidency::Entry& victim = residency_.at(ref);
  if (victim.location != ExpertLocation::kCache)
    Bug("evicts " + Name(ref) + ", which is not cached");
  victim.location = ExpertLocation::kAbsent;
  Effects effects;
  effects.evicted = ref;
  effects.evicted_unused_prefetch = victim.unused_prefetch;
  victim.unused_prefetch = false;
  return effects;
}

void PlanChecker::ReserveSlot() {
  if (++residency_.cached() > expert_slots_)
    Bug("fills more than its " + std::to_string(expert_slots_) + " expert slots");
}

void PlanChecker::AcquireStagingBuffer() {
  if (staging_buffers_ == 0) Bug("uses a staging buffer but reserves none");
  --staging_balance_;
}

void PlanChecker::ReleaseStagingBuffer() {
  if (++staging_balance_ > staging_buffers_) Bug("releases more staging buffers than it holds");
}

}  // namespace moelab::policies
