#include "validate/offload_ranking.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "report/format.h"

namespace moelab::validate {

std::string WorkloadLabel(const ValidationCase& c) {
  return c.kind == CaseKind::kOffloadPrefill ? "prefill " + std::to_string(c.prompt)
                                             : "decode B=" + std::to_string(c.batch);
}

namespace {

struct Timed {
  std::string policy;
  double seconds;
};

// Policies by time, ties broken by name.
std::vector<std::string> Order(std::vector<Timed> timed) {
  std::sort(timed.begin(), timed.end(), [](const Timed& a, const Timed& b) {
    return a.seconds != b.seconds ? a.seconds < b.seconds : a.policy < b.policy;
  });
  std::vector<std::string> order;
  for (const Timed& t : timed) order.push_back(t.policy);
  return order;
}

// The median of every `stride`-th run from `first`; nullopt when there is none.
std::optional<double> MedianOfRuns(const std::vector<double>& runs, size_t first, size_t stride) {
  std::vector<double> picked;
  for (size_t i = first; i < runs.size(); i += stride) picked.push_back(runs[i]);
  if (picked.empty()) return std::nullopt;
  return Quantile(picked, 0.5);
}

bool Before(const std::vector<std::string>& order, const std::string& a, const std::string& b) {
  return std::find(order.begin(), order.end(), a) < std::find(order.begin(), order.end(), b);
}

std::string Joined(const std::vector<std::string>& order) {
  std::string text;
  for (size_t i = 0; i < order.size(); ++i) text += (i ? " < " : "") + order[i];
  return text;
}

std::string PairsText(int64_t n) { return std::to_string(n) + (n == 1 ? " pair" : " pairs"); }

}  // namespace

int64_t OffloadRanking::BudgetsSame() const {
  return std::count_if(budgets.begin(), budgets.end(),
                       [](const BudgetRanking& b) { return b.Same(); });
}

int64_t OffloadRanking::BudgetsDifferingOnlyUnresolved() const {
  return std::count_if(budgets.begin(), budgets.end(), [](const BudgetRanking& b) {
    return !b.Same() && b.pairs_ordered_otherwise_resolved == 0;
  });
}

OffloadRanking RankOffloadPolicies(const std::vector<CaseResult>& results) {
  std::map<std::tuple<std::string, int64_t>, std::vector<const CaseResult*>> groups;
  std::vector<std::tuple<std::string, int64_t>> order;
  for (const CaseResult& r : results) {
    if (r.spec.kind != CaseKind::kOffload && r.spec.kind != CaseKind::kOffloadPrefill) continue;
    const std::tuple<std::string, int64_t> key{WorkloadLabel(r.spec), r.spec.expert_slots};
    if (!groups.count(key)) order.push_back(key);
    groups[key].push_back(&r);
  }
  OffloadRanking ranking;
  OffloadRanking::Halves halves;
  bool every_policy_has_halves = !order.empty();
  for (const auto& key : order) {
    const std::vector<const CaseResult*>& group = groups[key];
    BudgetRanking budget;
    budget.workload = std::get<0>(key);
    budget.expert_slots = std::get<1>(key);
    std::vector<Timed> measured, predicted, even, odd;
    bool halves_here = true;
    for (const CaseResult* r : group) {
      measured.push_back({r->spec.policy, r->measured});
      predicted.push_back({r->spec.policy, r->predicted});
      const std::optional<double> even_median = MedianOfRuns(r->measured_runs, 0, 2);
      const std::optional<double> odd_median = MedianOfRuns(r->measured_runs, 1, 2);
      halves_here = halves_here && even_median && odd_median;
      if (even_median && odd_median) {
        even.push_back({r->spec.policy, *even_median});
        odd.push_back({r->spec.policy, *odd_median});
      }
    }
    budget.measured_order = Order(measured);
    budget.predicted_order = Order(predicted);
    if (halves_here) {
      budget.even_runs_order = Order(even);
      budget.odd_runs_order = Order(odd);
    }
    every_policy_has_halves = every_policy_has_halves && halves_here;
    // Pairs of policies whose order the runs resolve: their measured ranges do not overlap, or
    // the runs paired by round and place (a policy's neighbours in a round ran seconds apart,
    // while this machine's speed moves by a fifth between rounds) favour one beyond chance.
    for (size_t i = 0; i < group.size(); ++i) {
      for (size_t j = i + 1; j < group.size(); ++j) {
        const CaseResult& a = *group[i];
        const CaseResult& b = *group[j];
        const std::string &p = a.spec.policy, &q = b.spec.policy;
        ++budget.pairs;
        const bool predicted_first = Before(budget.predicted_order, p, q);
        const bool agree = Before(budget.measured_order, p, q) == predicted_first;
        const bool apart = a.measured_max < b.measured_min || b.measured_max < a.measured_min;
        const bool paired =
            PairedSignTestP(a.measured_runs, b.measured_runs) < kRankingSignificance;
        ranking.pairs_apart += apart;
        ranking.pairs_apart_same += apart && agree;
        budget.pairs_ordered_otherwise += !agree;
        budget.pairs_ordered_otherwise_resolved += !agree && (apart || paired);
        if (apart || paired) {
          ++ranking.pairs_resolved;
          ranking.pairs_resolved_same += agree;
        }
        if (halves_here) {
          const bool even_first = Before(budget.even_runs_order, p, q);
          const bool odd_first = Before(budget.odd_runs_order, p, q);
          halves.pairs_same += even_first == odd_first;
          halves.pairs_predicted_as_even += predicted_first == even_first;
          halves.pairs_predicted_as_odd += predicted_first == odd_first;
        }
      }
    }
    ranking.pairs += budget.pairs;
    if (halves_here) {
      halves.budgets_same += budget.even_runs_order == budget.odd_runs_order;
      halves.budgets_predicted_as_even += budget.predicted_order == budget.even_runs_order;
      halves.budgets_predicted_as_odd += budget.predicted_order == budget.odd_runs_order;
    }
    ranking.budgets.push_back(std::move(budget));
  }
  if (every_policy_has_halves) ranking.halves = halves;
  return ranking;
}

std::vector<std::string> OffloadRankingNotes(const OffloadRanking& ranking) {
  std::vector<std::string> notes;
  for (const BudgetRanking& b : ranking.budgets) {
    notes.push_back("offload ranking, " + b.workload + ", " + std::to_string(b.expert_slots) +
                    " experts: " +
                    (b.Same() ? "same (" + Joined(b.measured_order) + ")"
                              : "differs (measured " + Joined(b.measured_order) + "; predicted " +
                                    Joined(b.predicted_order) + "; " +
                                    PairsText(b.pairs_ordered_otherwise) + " ordered otherwise, " +
                                    (b.pairs_ordered_otherwise_resolved == 0
                                         ? std::string("none")
                                         : std::to_string(b.pairs_ordered_otherwise_resolved)) +
                                    " of them resolved by the runs)"));
  }
  if (ranking.budgets.empty()) return notes;
  const std::string budgets = std::to_string(ranking.budgets.size());
  const std::string pairs = std::to_string(ranking.pairs);
  notes.push_back("offload ranking: the same at " + std::to_string(ranking.BudgetsSame()) + " of " +
                  budgets + " (workload, expert budget) pairs; of the rest, " +
                  std::to_string(ranking.BudgetsDifferingOnlyUnresolved()) +
                  " differ only in policy pairs the runs do not resolve");
  notes.push_back("offload policy pairs ordered by the measurement (min-max ranges apart): " +
                  std::to_string(ranking.pairs_apart) + " of " + pairs +
                  "; the prediction orders " + std::to_string(ranking.pairs_apart_same) +
                  " of them the same way");
  notes.push_back(
      "offload policy pairs ordered by the measurement (min-max ranges apart, or the runs paired "
      "by round and place favouring one policy: two-sided sign test p < " +
      report::ShortestText(kRankingSignificance) + "): " + std::to_string(ranking.pairs_resolved) +
      " of " + pairs + "; the prediction orders " + std::to_string(ranking.pairs_resolved_same) +
      " of them the same way");
  if (ranking.halves) {
    const OffloadRanking::Halves& h = *ranking.halves;
    notes.push_back(
        "offload ranking against the executor itself (each policy's even-numbered runs and its "
        "odd-numbered runs, the median of each): the two halves rank the policies alike at " +
        std::to_string(h.budgets_same) + " of " + budgets + " budgets and order " +
        std::to_string(h.pairs_same) + " of " + pairs +
        " policy pairs alike; the prediction ranks like the even half at " +
        std::to_string(h.budgets_predicted_as_even) + " and like the odd half at " +
        std::to_string(h.budgets_predicted_as_odd) + ", and orders " +
        std::to_string(h.pairs_predicted_as_even) + " and " +
        std::to_string(h.pairs_predicted_as_odd) +
        " pairs like them: where a half of the runs does not reproduce the other's order, the "
        "strict ranking is the machine's noise");
  }
  return notes;
}

nlohmann::json OffloadRankingJson(const OffloadRanking& ranking) {
  nlohmann::json budgets = nlohmann::json::array();
  for (const BudgetRanking& b : ranking.budgets) {
    budgets.push_back({{"workload", b.workload},
                       {"expert_slots", b.expert_slots},
                       {"same", b.Same()},
                       {"measured_order", b.measured_order},
                       {"predicted_order", b.predicted_order},
                       {"pairs", b.pairs},
                       {"pairs_ordered_otherwise", b.pairs_ordered_otherwise},
                       {"pairs_ordered_otherwise_resolved", b.pairs_ordered_otherwise_resolved},
                       {"even_runs_order", b.even_runs_order},
                       {"odd_runs_order", b.odd_runs_order}});
  }
  nlohmann::json json = {
      {"budgets", budgets},
      {"budgets_same", ranking.BudgetsSame()},
      {"budgets_differing_only_in_unresolved_pairs", ranking.BudgetsDifferingOnlyUnresolved()},
      {"pairs", ranking.pairs},
      {"pairs_apart", ranking.pairs_apart},
      {"pairs_apart_same", ranking.pairs_apart_same},
      {"pairs_resolved", ranking.pairs_resolved},
      {"pairs_resolved_same", ranking.pairs_resolved_same},
      {"halves", nullptr}};
  if (ranking.halves) {
    const OffloadRanking::Halves& h = *ranking.halves;
    json["halves"] = {{"budgets_same", h.budgets_same},
                      {"budgets_predicted_as_even", h.budgets_predicted_as_even},
                      {"budgets_predicted_as_odd", h.budgets_predicted_as_odd},
                      {"pairs_same", h.pairs_same},
                      {"pairs_predicted_as_even", h.pairs_predicted_as_even},
                      {"pairs_predicted_as_odd", h.pairs_predicted_as_odd}};
  }
  return json;
}

}  // namespace moelab::validate
