#include "policies/plan_checker.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::ErrorOf;

// 2 MoE layers x 4 experts, 2 cache slots, 1 staging buffer; experts 0 and 1 of layer 0 cached.
PlanChecker Checker(int64_t slots = 2, int64_t staging = 1) {
  PlanChecker checker("test-policy", 2, 4, slots, staging);
  checker.PlaceInitial({0, 0});
  checker.PlaceInitial({0, 1});
  return checker;
}

ExpertDecision Decision(int32_t expert, ExpertAction action,
                        FetchTarget target = FetchTarget::kCache,
                        std::optional<ExpertRef> evict = std::nullopt, bool promote = false) {
  ExpertDecision decision;
  decision.expert = expert;
  decision.action = action;
  decision.target = target;
  decision.evict = evict;
  decision.promote = promote;
  return decision;
}

PrefetchRequest Prefetch(ExpertRef expert, FetchTarget target,
                         std::optional<ExpertRef> evict = std::nullopt) {
  PrefetchRequest request;
  request.expert = expert;
  request.target = target;
  request.evict = evict;
  return request;
}

ExpertLocation Where(const PlanChecker& checker, ExpertRef ref) {
  return checker.residency().at(ref).location;
}

TEST(PlanChecker, AppliesAValidLayer) {
  PlanChecker checker = Checker();
  checker.EndInitialPlacement();
  EXPECT_FALSE(checker.ApplyDecision(0, Decision(0, ExpertAction::kResident)).evicted);
  const PlanChecker::Effects fetch = checker.ApplyDecision(
      0, Decision(2, ExpertAction::kFetch, FetchTarget::kCache, ExpertRef{0, 1}));
  ASSERT_TRUE(fetch.evicted);
  EXPECT_EQ(*fetch.evicted, (ExpertRef{0, 1}));
  EXPECT_EQ(Where(checker, {0, 1}), ExpertLocation::kAbsent);
  EXPECT_EQ(Where(checker, {0, 2}), ExpertLocation::kCache);
  checker.ApplyDecision(0, Decision(3, ExpertAction::kFetch, FetchTarget::kTransient));
  EXPECT_EQ(Where(checker, {0, 3}), ExpertLocation::kAbsent);  // run, then dropped
  checker.ApplyDecision(0, Decision(1, ExpertAction::kCpu));
  EXPECT_EQ(checker.residency().cached(), 2);
}

TEST(PlanChecker, TracksPrefetchesUsedAndWasted) {
  PlanChecker checker = Checker();
  // A staged prefetch, then promoted into the slot of expert 0: its prefetch is used.
  EXPECT_FALSE(checker.ApplyPrefetch(Prefetch({1, 2}, FetchTarget::kStaged)).evicted);
  EXPECT_EQ(Where(checker, {1, 2}), ExpertLocation::kStaging);
  const PlanChecker::Effects promote = checker.ApplyDecision(
      1, Decision(2, ExpertAction::kResident, FetchTarget::kCache, ExpertRef{0, 0}, true));
  EXPECT_TRUE(promote.used_prefetch);
  EXPECT_EQ(Where(checker, {1, 2}), ExpertLocation::kCache);
  // A cached prefetch evicted before use is wasted; a discarded staged one too.
  checker.ApplyPrefetch(Prefetch({1, 3}, FetchTarget::kCache, ExpertRef{0, 1}));
  EXPECT_TRUE(checker.ApplyPrefetch(Prefetch({1, 0}, FetchTarget::kCache, ExpertRef{1, 3}))
                  .evicted_unused_prefetch);
  checker.ApplyPrefetch(Prefetch({0, 3}, FetchTarget::kStaged));
  EXPECT_TRUE(checker.ApplyDiscard({0, 3}));
  EXPECT_EQ(Where(checker, {0, 3}), ExpertLocation::kAbsent);
}

// Every violation, with the message the simulator has always given.
TEST(PlanChecker, ReportsEveryViolationAsAPolicyBug) {
  const auto bug = [](auto action) { return ErrorOf(action); };
  EXPECT_EQ(bug([] { Checker().ApplyDecision(0, Decision(2, ExpertAction::kResident)); }),
            "policy 'test-policy': runs expert 2 of MoE layer 0 as resident, but it is not on the "
            "accelerator (a policy bug)");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(0, Decision(0, ExpertAction::kResident,
                                                        FetchTarget::kCache, std::nullopt, true));
                  }),
                  "promotes expert 0 of MoE layer 0, which is not staged");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(0, Decision(0, ExpertAction::kResident,
                                                        FetchTarget::kCache, ExpertRef{0, 1}));
                  }),
                  "evicts without a fetch or promotion");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(
                        0, Decision(2, ExpertAction::kFetch, FetchTarget::kCache, ExpertRef{1, 1}));
                  }),
                  "evicts expert 1 of MoE layer 1, which is not cached");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(
                        0, Decision(2, ExpertAction::kFetch, FetchTarget::kCache, ExpertRef{5, 0}));
                  }),
                  "evicts an expert outside the model (fetch)");
  EXPECT_CONTAINS(bug([] { Checker().ApplyDecision(0, Decision(0, ExpertAction::kFetch)); }),
                  "fetches expert 0 of MoE layer 0, which is already on the accelerator");
  EXPECT_CONTAINS(bug([] { Checker().ApplyDecision(0, Decision(2, ExpertAction::kFetch)); }),
                  "fills more than its 2 expert slots");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(
                        0, Decision(2, ExpertAction::kFetch, FetchTarget::kStaged));
                  }),
                  "fetches into a staged buffer on demand");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(0, Decision(2, ExpertAction::kFetch,
                                                        FetchTarget::kTransient, ExpertRef{0, 0}));
                  }),
                  "evicts for a transient fetch");
  EXPECT_CONTAINS(bug([] {
                    Checker(2, 0).ApplyDecision(
                        0, Decision(2, ExpertAction::kFetch, FetchTarget::kTransient));
                  }),
                  "uses a staging buffer but reserves none");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDecision(
                        0, Decision(2, ExpertAction::kCpu, FetchTarget::kCache, ExpertRef{0, 0}));
                  }),
                  "evicts or promotes for a CPU run");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyPrefetch(Prefetch({2, 0}, FetchTarget::kCache));
                  }),
                  "prefetches an expert outside the model");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyPrefetch(Prefetch({0, 1}, FetchTarget::kStaged));
                  }),
                  "prefetches expert 1 of MoE layer 0, which is already there");
  EXPECT_CONTAINS(
      bug([] {
        Checker().ApplyPrefetch(Prefetch({1, 1}, FetchTarget::kStaged, ExpertRef{0, 0}));
      }),
      "evicts for a staged prefetch (staged experts do not evict)");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyPrefetch(Prefetch({1, 1}, FetchTarget::kTransient));
                  }),
                  "prefetches into a transient buffer");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyPrefetch(Prefetch({1, 1}, FetchTarget::kCache));
                  }),
                  "fills more than its 2 expert slots");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDiscard({0, 0});
                  }),
                  "discards expert 0 of MoE layer 0, which is not staged");
  EXPECT_CONTAINS(bug([] {
                    Checker().ApplyDiscard({0, 9});
                  }),
                  "discards an expert outside the model");
}

TEST(PlanChecker, MoreStagedCopiesThanBuffersWaitRatherThanFail) {
  // Two staged prefetches share one buffer: the second copy waits for it (the engine orders
  // that), which is no bug; both are then released. Each staged expert holds exactly one buffer,
  // so releases never outnumber reservations.
  PlanChecker checker = Checker(2, 1);
  checker.ApplyPrefetch(Prefetch({1, 0}, FetchTarget::kStaged));
  checker.ApplyPrefetch(Prefetch({1, 1}, FetchTarget::kStaged));
  EXPECT_TRUE(checker.ApplyDiscard({1, 0}));  // never used: wasted
  checker.ApplyDecision(
      1, Decision(1, ExpertAction::kResident, FetchTarget::kCache, ExpertRef{0, 0}, true));
  EXPECT_EQ(Where(checker, {1, 1}), ExpertLocation::kCache);
  EXPECT_EQ(checker.residency().cached(), 2);
}

TEST(PlanChecker, InitialPlacementAndPlanShape) {
  PlanChecker checker("p", 2, 4, 1, 0);
  EXPECT_CONTAINS(ErrorOf([&] {
                    checker.PlaceInitial({0, 4});
                  }),
                  "initial placement names an expert outside the model");
  checker.PlaceInitial({0, 0});
  EXPECT_CONTAINS(ErrorOf([&] {
                    checker.PlaceInitial({0, 0});
                  }),
                  "initial placement names expert 0 of MoE layer 0 twice");
  checker.PlaceInitial({0, 1});
  EXPECT_CONTAINS(ErrorOf([&] { checker.EndInitialPlacement(); }),
                  "initial placement exceeds its own expert slots");

  LayerPlan plan;
  plan.decisions.push_back(Decision(1, ExpertAction::kResident));
  EXPECT_CONTAINS(ErrorOf([&] { checker.CheckIterationPlan(plan); }),
                  "BeginIteration may only prefetch");
  const std::vector<ExpertDemand> two = {{0, 1}, {1, 1}};
  EXPECT_CONTAINS(ErrorOf([&] { checker.CheckDecisionCount(two, plan); }),
                  "planned 1 experts for a demand of 2");
  const std::vector<ExpertDemand> one = {{0, 1}};
  EXPECT_CONTAINS(ErrorOf([&] { checker.CheckDecisionOrder(one, plan); }),
                  "decisions out of the demand's order");
}

TEST(PlanChecker, MemoryPlanMustFitUnlessTheIdeal) {
  MemoryPlan plan;
  plan.expert_slots = 7;
  plan.staging_buffers = 1;
  plan.available_expert_slots = 6;
  plan.fits_accelerator = false;
  const PlanChecker checker("p", 2, 4, 7, 1);
  EXPECT_EQ(ErrorOf([&] { checker.CheckMemory(plan, false); }),
            "policy 'p': asks for 7 expert slots and 1 staging buffers, but accelerator memory "
            "holds 6 (a policy bug)");
  checker.CheckMemory(plan, true);  // resident: reported as fits_accelerator false, not refused
}

}  // namespace
}  // namespace moelab::policies
