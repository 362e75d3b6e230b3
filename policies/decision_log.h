#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policies/offload_policy.h"
#include "policies/plan_checker.h"

namespace moelab::policies {

// What an engine carried out, decision by decision: the sequence the simulator and the executor's
// offload runtime must agree on for the same routing and settings (tests/executor/
// offload_same_decisions_test.cc). Each engine appends right after PlanChecker applied the
// decision. Hits are not split by timing (a copy still in flight counts as a hit in both).
enum class DecisionKind : uint8_t {
  kHit,        // resident: run from the cache (or a staging buffer)
  kPromote,    // resident from a staging buffer, now a cache slot
  kFetch,      // demand read into the cache
  kTransient,  // demand read into a staging buffer, dropped after use
  kCpu,        // run where its home copy lives (the CPU; on a CPU-only machine: read from storage)
  kEvict,      // a cache slot taken (after the decision or prefetch that took it)
  kPrefetch,   // a prefetch issued
  kDiscard,    // a staged expert dropped
};
std::string ToString(DecisionKind kind);

struct DecisionEvent {
  int64_t pass = 0;
  ExpertRef expert;
  DecisionKind kind = DecisionKind::kHit;
  bool operator==(const DecisionEvent&) const = default;
};
std::string ToString(const DecisionEvent& event);  // "pass 3 layer 1 expert 5 fetch"

void RecordDecision(std::vector<DecisionEvent>& log, int64_t pass, int32_t layer,
                    const ExpertDecision& decision, const PlanChecker::Effects& effects);
void RecordPrefetch(std::vector<DecisionEvent>& log, int64_t pass, const PrefetchRequest& request,
                    const PlanChecker::Effects& effects);
void RecordDiscard(std::vector<DecisionEvent>& log, int64_t pass, ExpertRef expert);

}  // namespace moelab::policies
