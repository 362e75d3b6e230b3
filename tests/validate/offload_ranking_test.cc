// The offload policies' ranking, simulator against executor: per budget, per pair, and the
// executor against itself.
#include "validate/offload_ranking.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace moelab::validate {
namespace {

CaseResult Result(const std::string& policy, int64_t slots, double predicted, double measured,
                  std::vector<double> runs = {}) {
  CaseResult r;
  r.spec.kind = CaseKind::kOffload;
  r.spec.policy = policy;
  r.spec.expert_slots = slots;
  r.predicted = predicted;
  r.measured = measured;
  r.measured_min = 0.9 * measured;
  r.measured_max = 1.1 * measured;
  r.measured_runs = std::move(runs);
  return r;
}

TEST(OffloadRanking, IsComparedPerWorkloadAndBudget) {
  // b and c at 24 experts overlap (18-22 and 18.9-23.1), but in each of six rounds c ran slower
  // than b beside it: the paired runs resolve them (sign test p = 2 / 2^6). At 16 they overlap too
  // and five of their six pairs favour b: not beyond chance (p = 14 / 64).
  const std::vector<double> b_runs = {18, 20, 22, 19, 21, 20};
  const std::vector<double> c_runs = {18.9, 21, 23.1, 19.5, 21.5, 20.5};
  const std::vector<double> c_mixed = {18.9, 21, 23.1, 18.5, 21.5, 20.5};
  const std::vector<std::string> notes = OffloadRankingNotes(
      RankOffloadPolicies({Result("a", 8, 1, 10), Result("b", 8, 2, 20), Result("a", 16, 2, 10),
                           Result("b", 16, 1, 20, b_runs), Result("c", 16, 3, 21, c_mixed),
                           Result("b", 24, 2, 20, b_runs), Result("c", 24, 1, 21, c_runs)}));
  // a ran once at 8 and 16 experts: no halves to compare, so no line for them.
  ASSERT_EQ(notes.size(), 6u);
  EXPECT_EQ(notes[0], "offload ranking, decode B=1, 8 experts: same (a < b)");
  // a-b apart in the runs (9-11 against 18-22) and predicted the other way round.
  EXPECT_EQ(notes[1],
            "offload ranking, decode B=1, 16 experts: differs (measured a < b < c; predicted b < a "
            "< c; 1 pair ordered otherwise, 1 of them resolved by the runs)");
  EXPECT_EQ(notes[2],
            "offload ranking, decode B=1, 24 experts: differs (measured b < c; predicted c < b; 1 "
            "pair ordered otherwise, 1 of them resolved by the runs)");
  EXPECT_EQ(notes[3],
            "offload ranking: the same at 1 of 3 (workload, expert budget) pairs; of the rest, 0 "
            "differ only in policy pairs the runs do not resolve");
  // a-b apart at both budgets (ordered the same at 8, not at 16), a-c apart and ordered the same,
  // b-c within each other's spread at 16 and 24.
  EXPECT_EQ(notes[4],
            "offload policy pairs ordered by the measurement (min-max ranges apart): 3 of 5; the "
            "prediction orders 2 of them the same way");
  // ... and b-c at 24 by their paired runs, predicted the other way round.
  EXPECT_EQ(notes[5],
            "offload policy pairs ordered by the measurement (min-max ranges apart, or the runs "
            "paired by round and place favouring one policy: two-sided sign test p < 0.05): 4 of "
            "5; the prediction orders 2 of them the same way");
}

// Each policy's even-numbered runs against its odd-numbered ones: at 8 experts the halves swap a
// and b (a 10 | 11, b 12 | 9) and the prediction ranks like the even half; at 16 both halves put a
// first and the prediction does not.
TEST(OffloadRanking, TheExecutorIsComparedWithItselfHalfAgainstHalf) {
  const OffloadRanking ranking = RankOffloadPolicies(
      {Result("a", 8, 1, 10.5, {10, 11, 10, 11}), Result("b", 8, 2, 10.5, {12, 9, 12, 9}),
       Result("c", 8, 3, 20, {20, 20, 20, 20}), Result("a", 16, 2, 10, {10, 10, 10, 10}),
       Result("b", 16, 1, 20, {20, 20, 20, 20})});
  ASSERT_EQ(ranking.budgets.size(), 2u);
  EXPECT_EQ(ranking.budgets[0].even_runs_order, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(ranking.budgets[0].odd_runs_order, (std::vector<std::string>{"b", "a", "c"}));
  EXPECT_EQ(ranking.budgets[1].even_runs_order, (std::vector<std::string>{"a", "b"}));
  ASSERT_TRUE(ranking.halves.has_value());
  const OffloadRanking::Halves& h = *ranking.halves;
  EXPECT_EQ(h.budgets_same, 1);               // 16 experts
  EXPECT_EQ(h.budgets_predicted_as_even, 1);  // 8 experts
  EXPECT_EQ(h.budgets_predicted_as_odd, 0);
  EXPECT_EQ(h.pairs_same, 3);               // all but a-b at 8
  EXPECT_EQ(h.pairs_predicted_as_even, 3);  // all three at 8, not a-b at 16
  EXPECT_EQ(h.pairs_predicted_as_odd, 2);   // b-c and a-c at 8
  const std::vector<std::string> notes = OffloadRankingNotes(ranking);
  ASSERT_FALSE(notes.empty());
  EXPECT_EQ(notes.back(),
            "offload ranking against the executor itself (each policy's even-numbered runs and "
            "its odd-numbered runs, the median of each): the two halves rank the policies alike at "
            "1 of 2 budgets and order 3 of 4 policy pairs alike; the prediction ranks like the "
            "even half at 1 and like the odd half at 0, and orders 3 and 2 pairs like them: where "
            "a half of the runs does not reproduce the other's order, the strict ranking is the "
            "machine's noise");

  const nlohmann::json json = OffloadRankingJson(ranking);
  EXPECT_EQ(json["budgets_same"], 1);  // 8 experts (a and b tied at 10.5, broken by name)
  EXPECT_EQ(json["pairs"], 4);
  EXPECT_EQ(json["budgets"][0]["workload"], "decode B=1");
  EXPECT_EQ(json["budgets"][0]["expert_slots"], 8);
  EXPECT_EQ(json["budgets"][0]["predicted_order"], nlohmann::json({"a", "b", "c"}));
  EXPECT_EQ(json["budgets"][1]["measured_order"], nlohmann::json({"a", "b"}));
  EXPECT_EQ(json["budgets"][1]["pairs_ordered_otherwise"], 1);
  EXPECT_EQ(json["halves"]["pairs_same"], 3);
  EXPECT_EQ(json["halves"]["budgets_predicted_as_even"], 1);
}

TEST(OffloadRanking, NoHalvesWhenAPolicyRanOnce) {
  const OffloadRanking ranking =
      RankOffloadPolicies({Result("a", 8, 1, 10, {10, 11}), Result("b", 8, 2, 20, {20})});
  EXPECT_FALSE(ranking.halves.has_value());
  EXPECT_TRUE(ranking.budgets[0].even_runs_order.empty());
  EXPECT_TRUE(OffloadRankingJson(ranking)["halves"].is_null());
}

}  // namespace
}  // namespace moelab::validate
