#include <gtest/gtest.h>

#include <cmath>
#include <iterator>
#include <random>
#include <set>

#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::Demand;
using testing::ErrorOf;
using testing::Plan;
using testing::TinySetup;

// Rows of an expert map: K = 1 expert per token, `expert` at every layer, with `rest` of the
// probability spread evenly over the others.
std::vector<float> Map(int64_t layers, int64_t experts, const std::vector<int32_t>& chosen,
                       float rest) {
  std::vector<float> map;
  for (int64_t layer = 0; layer < layers; ++layer) {
    for (int64_t e = 0; e < experts; ++e) {
      map.push_back(e == chosen[static_cast<size_t>(layer)]
                        ? 1.0f - rest
                        : rest / static_cast<float>(experts - 1));
    }
  }
  return map;
}

TEST(FmoePolicy, PrefetchDistanceIsValidated) {
  PolicyOptions options;
  options.prefetch_distance = 0;
  EXPECT_CONTAINS(ErrorOf([&] { MakeOffloadPolicy("fmoe", options, TinySetup(4, 4, 1, 8)); }),
                  "--prefetch-distance must be at least 1");
  options.prefetch_distance = 4;
  EXPECT_CONTAINS(ErrorOf([&] { MakeOffloadPolicy("fmoe", options, TinySetup(4, 4, 1, 8)); }),
                  "must be below the 4 MoE layers");
}

TEST(FmoePolicy, SemanticMatchPrefetchesTheFirstLayersOfTheMatchedMap) {
  OffloadSetup setup = TinySetup(4, 4, 1, 6);
  setup.history.push_back({0, {1.0f, 0.0f}, Map(4, 4, {3, 3, 3, 3}, 0.1f)});
  setup.history.push_back({1, {0.0f, 1.0f}, Map(4, 4, {2, 2, 2, 2}, 0.1f)});
  PolicyOptions options;
  options.prefetch_distance = 2;
  auto policy = MakeOffloadPolicy("fmoe", options, setup);
  policy->InitialPlacement();  // flat popularity: the first 6 experts in (layer, expert) order
  LayerPlan plan;
  IterationInfo info;
  info.semantic = {0.0f, 1.0f};  // identical to request 1: score 1, delta 0, N = K = 1
  policy->BeginIteration(info, plan);
  // Layers 0 and 1 from map 1: expert 2 of layer 0 is cached already, expert 2 of layer 1 not.
  ASSERT_EQ(plan.prefetches.size(), 1u);
  EXPECT_EQ(plan.prefetches[0].expert, (ExpertRef{1, 2}));
  EXPECT_EQ(plan.prefetches[0].target, FetchTarget::kCache);
  EXPECT_TRUE(plan.prefetches[0].evict.has_value());          // the cache is full
  EXPECT_NEAR(plan.prefetches[0].priority, 0.9 / 2.0, 1e-6);  // p / (l - l_now), l_now = -1
}

// Popularity that makes the initial placement skip the given layers.
model::PopularityTable SkipLayers(int64_t layers, int64_t experts,
                                  const std::set<int64_t>& skipped) {
  model::PopularityTable table(static_cast<size_t>(layers),
                               std::vector<double>(static_cast<size_t>(experts), 1.0));
  for (int64_t layer : skipped)
    table[static_cast<size_t>(layer)].assign(static_cast<size_t>(experts), 0.0);
  return table;
}

// The prefetches of a first pass whose request has embedding `semantic`, at distance 1 (layer 0).
std::vector<PrefetchRequest> FirstPassPrefetches(const OffloadSetup& setup,
                                                 const std::vector<float>& semantic) {
  PolicyOptions options;
  options.prefetch_distance = 1;
  auto policy = MakeOffloadPolicy("fmoe", options, setup);
  policy->InitialPlacement();
  LayerPlan plan;
  IterationInfo info;
  info.semantic = semantic;
  policy->BeginIteration(info, plan);
  for (const PrefetchRequest& request : plan.prefetches) EXPECT_EQ(request.expert.layer, 0);
  return plan.prefetches;
}

size_t PrefetchesAtStart(const std::vector<float>& semantic) {
  OffloadSetup setup = TinySetup(4, 4, 1, 12);
  setup.popularity = SkipLayers(4, 4, {0});  // layers 1-3 cached, layer 0 not
  // Expert 3 has 0.4 of the mass at every layer, the others 0.2 each.
  setup.history.push_back({0, {1.0f, 0.0f}, Map(4, 4, {3, 3, 3, 3}, 0.6f)});
  return FirstPassPrefetches(setup, semantic).size();
}

TEST(FmoePolicy, LowerScoresPrefetchMoreProbabilityMass) {
  EXPECT_EQ(PrefetchesAtStart({1.0f, 0.0f}), 1u);        // score 1, delta 0: K = 1 expert
  EXPECT_EQ(PrefetchesAtStart({1.0f, 1.7320508f}), 2u);  // score 0.5, delta 0.5: 0.4 + 0.2
  EXPECT_EQ(PrefetchesAtStart({0.0f, 1.0f}), 4u);        // score 0, delta 1: the whole layer
}

// The prefetch order: the matched map's probabilities, highest first, ties by calibration
// popularity, highest first, then by index (a stable sort), as the comparisons of a stable
// insertion make it (a NaN compares false with everything). Probabilities with ties, -0 beside +0
// and, in some trials, NaN; 8 experts (the order picked one at a time) and 40 (sorted once).
TEST(FmoePolicy, PrefetchOrderIsTheStableSortByProbabilityThenPopularity) {
  std::mt19937 random(13);
  const float kValues[] = {-0.0f, 0.0f, 0.05f, 0.1f, 0.2f, 0.3f};
  for (const int64_t experts : {8, 40}) {
    for (int trial = 0; trial < 60; ++trial) {
      OffloadSetup setup = TinySetup(2, experts, 1, experts);
      // Layer 1 the most popular (cached at the start), layer 0's counts with ties.
      setup.popularity.assign(2, std::vector<double>(static_cast<size_t>(experts)));
      for (double& count : setup.popularity[0]) count = static_cast<double>(random() % 3);
      for (double& count : setup.popularity[1]) count = 100.0 + static_cast<double>(random() % 3);
      std::vector<float> map(static_cast<size_t>(2 * experts), 0.1f);
      for (int64_t e = 0; e < experts; ++e)
        map[static_cast<size_t>(e)] = kValues[random() % std::size(kValues)];
      if (trial % 6 == 5) map[random() % static_cast<size_t>(experts)] = std::nanf("");
      setup.history.push_back({0, {1.0f, 0.0f}, map});
      // Score 0, delta 1: prefetch until the mass reaches 1.
      const std::vector<PrefetchRequest> prefetches = FirstPassPrefetches(setup, {0.0f, 1.0f});

      const float* p = map.data();
      const std::vector<double>& counts = setup.popularity[0];
      std::vector<int32_t> order;
      for (int32_t e = 0; e < static_cast<int32_t>(experts); ++e) {
        size_t at = order.size();
        while (at > 0 && (p[e] != p[order[at - 1]] ? p[e] > p[order[at - 1]]
                                                   : counts[e] > counts[order[at - 1]]))
          --at;
        order.insert(order.begin() + static_cast<std::ptrdiff_t>(at), e);
      }
      std::vector<int32_t> expected;
      double mass = 0;
      for (size_t n = 0; n < order.size(); ++n) {
        if (n >= 1 && mass >= 1.0) break;
        expected.push_back(order[n]);
        mass += p[order[n]];
      }
      std::vector<int32_t> prefetched;
      for (const PrefetchRequest& request : prefetches) prefetched.push_back(request.expert.expert);
      ASSERT_EQ(prefetched, expected) << "E " << experts << " trial " << trial;
    }
  }
}

TEST(FmoePolicy, TrajectorySearchFollowsTheMatchingMap) {
  OffloadSetup setup = TinySetup(4, 4, 1, 8);
  setup.popularity = SkipLayers(4, 4, {0, 1});  // layers 2 and 3 cached
  setup.history.push_back({0, {1.0f, 0.0f}, Map(4, 4, {0, 1, 2, 3}, 0.0f)});
  setup.history.push_back({1, {1.0f, 0.0f}, Map(4, 4, {3, 2, 1, 0}, 0.0f)});
  PolicyOptions options;
  options.prefetch_distance = 1;
  auto policy = MakeOffloadPolicy("fmoe", options, setup);
  policy->InitialPlacement();
  LayerPlan plan;
  IterationInfo info;
  info.semantic = {1.0f, 0.0f};  // both maps match semantically: the most recent (the second) wins
  policy->BeginIteration(info, plan);
  ASSERT_EQ(plan.prefetches.size(), 1u);
  EXPECT_EQ(plan.prefetches[0].expert, (ExpertRef{0, 3}));
  // Layer 0 actually routes to expert 0: the trajectory now matches the first map, whose layer 1
  // (= 0 + d) expert is 1.
  const LayerPlan layer0 = Plan(*policy, {0, {{0, 1}}, {}, {1.0f, 0.0f, 0.0f, 0.0f}});
  EXPECT_EQ(layer0.decisions[0].action, ExpertAction::kFetch);
  ASSERT_EQ(layer0.prefetches.size(), 1u);
  EXPECT_EQ(layer0.prefetches[0].expert, (ExpertRef{1, 1}));
  EXPECT_NEAR(layer0.prefetches[0].priority, 1.0, 1e-6);  // p / (l - l_now) = 1 / 1
}

TEST(FmoePolicy, EvictsTheLowestProbabilityTimesFrequencyNotWhatThePassStillNeeds) {
  OffloadSetup setup = TinySetup(3, 2, 1, 3);  // initial cache: (0,0), (0,1), (1,0)
  setup.history.push_back({0, {1.0f, 0.0f}, Map(3, 2, {0, 0, 0}, 0.2f)});  // p = 0.8 / 0.2
  PolicyOptions options;
  options.prefetch_distance = 1;
  auto policy = MakeOffloadPolicy("fmoe", options, setup);
  policy->InitialPlacement();
  LayerPlan plan;
  IterationInfo info;
  info.semantic = {1.0f, 0.0f};
  policy->BeginIteration(info, plan);
  EXPECT_TRUE(plan.prefetches.empty());  // (0,0) is cached
  // Layer 0 routes 5 tokens to expert 1: freq(0,1) = 6. Its trajectory still predicts (1,0),
  // cached, which is now wanted for layer 1.
  Demand layer0{0, {{1, 5}}};
  layer0.tokens = 5;
  EXPECT_EQ(Plan(*policy, layer0).decisions[0].action, ExpertAction::kResident);
  // Layer 1 needs (1,1): the victim is (0,0) with p x freq = 0.801 x 1, not (0,1) with
  // 0.201 x 6 = 1.206, and never (1,0), which this pass still wants.
  const LayerPlan layer1 = Plan(*policy, {1, {{1, 1}}});
  ASSERT_EQ(layer1.decisions[0].action, ExpertAction::kFetch);
  EXPECT_EQ(*layer1.decisions[0].evict, (ExpertRef{0, 0}));
}

TEST(FmoePolicy, StoresEveryPassUnlessRedundant) {
  OffloadSetup setup = TinySetup(4, 2, 1, 8);
  PolicyOptions options;
  options.prefetch_distance = 1;
  auto policy = MakeOffloadPolicy("fmoe", options, setup);
  policy->InitialPlacement();
  for (int pass = 0; pass < 3; ++pass) {
    LayerPlan plan;
    IterationInfo info;
    info.index = pass;
    info.semantic = {1.0f, 0.0f};
    policy->BeginIteration(info, plan);
    for (int32_t layer = 0; layer < 4; ++layer) Plan(*policy, {layer, {{0, 1}}});
    policy->EndIteration();
  }
  EXPECT_EQ(policy->Stats().map_store_size, 1);  // the same map three times: stored once
}

}  // namespace
}  // namespace moelab::policies
