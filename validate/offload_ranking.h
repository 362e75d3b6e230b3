#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "validate/validation_case.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {

// "decode B=1", "decode B=4", "prefill 256": an offload case's workload.
std::string WorkloadLabel(const ValidationCase& c);

// The offload policies of one (workload, expert budget), each ordered by time (ties broken by
// policy name).
struct BudgetRanking {
  std::string workload;
  int64_t expert_slots = 0;
  std::vector<std::string> measured_order;   // by the median over every run
  std::vector<std::string> predicted_order;  // by the simulator's prediction
  int64_t pairs = 0;
  int64_t pairs_ordered_otherwise = 0;           // by the prediction, against the measured order
  int64_t pairs_ordered_otherwise_resolved = 0;  // ... of which the runs resolve the order
  // The executor against itself: the order by the median of each policy's even-numbered runs
  // (0, 2, ... in the order they ran) and by the odd-numbered ones. Empty when a policy ran once.
  std::vector<std::string> even_runs_order, odd_runs_order;

  bool Same() const { return measured_order == predicted_order; }
};

// The simulator's ranking of the offload policies judged against the executor's, budget by budget
// and pair by pair, with the ceiling the machine's noise puts on it: how often two halves of the
// same runs rank the policies alike. Where the executor does not reproduce its own order, no
// prediction can match "the" measured order, and comparing the prediction with each half says
// whether it ranks as well as a repeat of the measurement does.
struct OffloadRanking {
  std::vector<BudgetRanking> budgets;
  int64_t pairs = 0;
  // Pairs the runs order: min-max ranges apart; those or the paired sign test (PairedSignTestP
  // below kRankingSignificance); and of each, how many the prediction orders the same way.
  int64_t pairs_apart = 0, pairs_apart_same = 0;
  int64_t pairs_resolved = 0, pairs_resolved_same = 0;

  struct Halves {
    int64_t budgets_same = 0;  // even runs' order == odd runs' order
    int64_t budgets_predicted_as_even = 0, budgets_predicted_as_odd = 0;
    int64_t pairs_same = 0;  // policy pairs the two halves order alike
    int64_t pairs_predicted_as_even = 0, pairs_predicted_as_odd = 0;
  };
  std::optional<Halves> halves;  // nullopt when some policy ran once

  int64_t BudgetsSame() const;
  // Budgets whose orders differ only in pairs the runs do not resolve.
  int64_t BudgetsDifferingOnlyUnresolved() const;
};

// A pair of policies the paired runs resolve: the sign test's two-sided p below this.
inline constexpr double kRankingSignificance = 0.05;

// Over the offload cases of `results` (others are skipped), grouped by (workload, expert budget)
// in the order they first appear.
OffloadRanking RankOffloadPolicies(const std::vector<CaseResult>& results);

// For ValidationResult::notes: one line per budget (same, or how it differs), the count, the
// pairs resolved by min-max ranges and by those or the sign test, and the executor against itself.
std::vector<std::string> OffloadRankingNotes(const OffloadRanking& ranking);

// validation.json's `offload_ranking` (validate/README.md).
nlohmann::json OffloadRankingJson(const OffloadRanking& ranking);

}  // namespace moelab::validate
