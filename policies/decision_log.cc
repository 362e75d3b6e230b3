#include "policies/decision_log.h"

namespace moelab::policies {

std::string ToString(DecisionKind kind) {
  switch (kind) {
    case DecisionKind::kHit:
      return "hit";
    case DecisionKind::kPromote:
      return "promote";
    case DecisionKind::kFetch:
      return "fetch";
    case DecisionKind::kTransient:
      return "transient";
    case DecisionKind::kCpu:
      return "cpu";
    case DecisionKind::kEvict:
      return "evict";
    case DecisionKind::kPrefetch:
      return "prefetch";
    case DecisionKind::kDiscard:
      return "discard";
  }
  return "?";
}

std::string ToString(const DecisionEvent& e) {
  return "pass " + std::to_string(e.pass) + " layer " + std::to_string(e.expert.layer) +
         " expert " + std::to_string(e.expert.expert) + " " + ToString(e.kind);
}

void RecordDecision(std::vector<DecisionEvent>& log, int64_t pass, int32_t layer,
                    const ExpertDecision& decision, const PlanChecker::Effects& effects) {
  DecisionKind kind = DecisionKind::kHit;
  switch (decision.action) {
    case ExpertAction::kResident:
      kind = decision.promote ? DecisionKind::kPromote : DecisionKind::kHit;
      break;
    case ExpertAction::kFetch:
      kind =
          decision.target == FetchTarget::kCache ? DecisionKind::kFetch : DecisionKind::kTransient;
      break;
    case ExpertAction::kCpu:
      kind = DecisionKind::kCpu;
      break;
  }
  log.push_back({pass, {layer, decision.expert}, kind});
  if (effects.evicted) log.push_back({pass, *effects.evicted, DecisionKind::kEvict});
}

void RecordPrefetch(std::vector<DecisionEvent>& log, int64_t pass, const PrefetchRequest& request,
                    const PlanChecker::Effects& effects) {
  log.push_back({pass, request.expert, DecisionKind::kPrefetch});
  if (effects.evicted) log.push_back({pass, *effects.evicted, DecisionKind::kEvict});
}

void RecordDiscard(std::vector<DecisionEvent>& log, int64_t pass, ExpertRef expert) {
  log.push_back({pass, expert, DecisionKind::kDiscard});
}

}  // namespace moelab::policies
