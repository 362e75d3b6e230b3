#include <gtest/gtest.h>

#include <set>

#include "model/fiddler.h"
#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::Demand;
using testing::ErrorOf;
using testing::Plan;
using testing::TinySetup;

OffloadSetup FiddlerSetup(int64_t slots) {
  OffloadSetup setup = TinySetup(2, 4, 2, slots, 1);
  setup.popularity = {{5, 1, 9, 2}, {3, 8, 1, 7}};
  // cpu_lat(s) = 1 ms + 1 ms s; gpu 0.5 ms; transfer 10 ms: copying wins from s = 10 on.
  setup.latency = {0.001, 0.001, 0.0005, 0.010};
  return setup;
}

TEST(FiddlerPolicy, PlacesTheMostPopularExperts) {
  auto policy = MakeOffloadPolicy("fiddler", {}, FiddlerSetup(3));
  EXPECT_EQ(policy->StagingBuffersUsed(), 1);
  const std::vector<ExpertRef> placed = policy->InitialPlacement();
  EXPECT_EQ(placed, (std::vector<ExpertRef>{{0, 2}, {1, 1}, {1, 3}}));
}

TEST(FiddlerPolicy, FollowsAlgorithmOnePerExpert) {
  const OffloadSetup setup = FiddlerSetup(3);
  auto policy = MakeOffloadPolicy("fiddler", {}, setup);
  policy->InitialPlacement();
  // Layer 0: expert 2 placed; 0 with 1 token (CPU: 2 ms < 10.5 ms); 1 with 20 tokens (copy).
  const LayerPlan plan = Plan(*policy, {0, {{0, 1}, {1, 20}, {2, 3}}});
  ASSERT_EQ(plan.decisions.size(), 3u);
  EXPECT_EQ(plan.decisions[0].action, ExpertAction::kCpu);
  EXPECT_EQ(plan.decisions[1].action, ExpertAction::kFetch);
  EXPECT_EQ(plan.decisions[1].target, FetchTarget::kTransient);
  EXPECT_FALSE(plan.decisions[1].evict.has_value());  // the placement never changes
  EXPECT_EQ(plan.decisions[2].action, ExpertAction::kResident);
  for (int64_t tokens : {1, 9, 10, 11, 100}) {
    const model::ExpertExecution expected = model::FiddlerDecide(setup.latency, tokens, false);
    const ExpertAction got = Plan(*policy, {0, {{0, tokens}}}).decisions[0].action;
    EXPECT_EQ(got == ExpertAction::kFetch, expected == model::ExpertExecution::kCopyWeightsThenGpu)
        << tokens;
  }
}

TEST(FiddlerPolicy, MoreMemoryPlacesASuperset) {
  std::set<std::pair<int32_t, int32_t>> previous;
  for (int64_t slots = 1; slots <= 8; ++slots) {
    auto policy = MakeOffloadPolicy("fiddler", {}, FiddlerSetup(slots));
    std::set<std::pair<int32_t, int32_t>> placed;
    for (const ExpertRef& ref : policy->InitialPlacement()) placed.insert({ref.layer, ref.expert});
    EXPECT_TRUE(std::includes(placed.begin(), placed.end(), previous.begin(), previous.end()))
        << slots;
    previous = placed;
  }
}

TEST(FiddlerPolicy, NeedsAStagingBuffer) {
  PolicyOptions options;
  options.staging_buffers = 0;
  EXPECT_CONTAINS(ErrorOf([&] { MakeOffloadPolicy("fiddler", options, FiddlerSetup(3)); }),
                  "--staging-buffers must be at least 1");
}

}  // namespace
}  // namespace moelab::policies
