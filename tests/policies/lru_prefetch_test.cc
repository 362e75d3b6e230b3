#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <memory>
#include <random>

#include "policies/registry.h"
#include "routing/routing_source.h"
#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::Demand;
using testing::ErrorOf;
using testing::Plan;
using testing::TinySetup;

PolicyOptions Options(int64_t k, int64_t prefetch, int64_t staging = 4) {
  PolicyOptions options;
  options.cache_per_layer = k;
  options.prefetch = prefetch;
  options.staging_buffers = staging;
  return options;
}

TEST(LruPrefetchPolicy, DefaultCacheSplitsMemoryEvenlyOverLayers) {
  auto policy = MakeOffloadPolicy("lru-prefetch", {}, TinySetup(4, 8, 2, 13, 4));
  EXPECT_EQ(policy->ExpertSlots(), 12);  // 3 per layer
  EXPECT_EQ(policy->StagingBuffersUsed(), 4);
  EXPECT_EQ(policy->InitialPlacement().size(), 12u);
}

TEST(LruPrefetchPolicy, OptionErrorsNameTheOption) {
  EXPECT_CONTAINS(
      ErrorOf([] { MakeOffloadPolicy("lru-prefetch", Options(9, 1), TinySetup(2, 8, 2, 99, 4)); }),
      "--cache-per-layer must be in [1, 8]");
  EXPECT_CONTAINS(
      ErrorOf([] { MakeOffloadPolicy("lru-prefetch", Options(4, 1), TinySetup(2, 8, 2, 6, 4)); }),
      "at most 3 per layer fit");
  EXPECT_CONTAINS(ErrorOf([] {
                    MakeOffloadPolicy("lru-prefetch", Options(2, 3, 2), TinySetup(2, 8, 2, 99, 2));
                  }),
                  "--prefetch 3 needs as many staging buffers, but --staging-buffers is 2");
  EXPECT_CONTAINS(
      ErrorOf([] { MakeOffloadPolicy("lru-prefetch", Options(2, -1), TinySetup(2, 8, 2, 99, 4)); }),
      "--prefetch must be at least 0");
  EXPECT_CONTAINS(ErrorOf([] { MakeOffloadPolicy("lru-prefetch", {}, TinySetup(4, 8, 2, 3, 4)); }),
                  "does not hold one expert per layer");
}

TEST(LruPrefetchPolicy, SpeculativeLoadsDoNotEvictAndReplaceTheLeastRecentWhenUsed) {
  auto policy = MakeOffloadPolicy("lru-prefetch", Options(2, 1), TinySetup(2, 4, 1, 4, 4));
  policy->InitialPlacement();  // flat popularity: experts 0 (MRU) and 1 of each layer
  // Layer 0 uses expert 0; the speculative gate says layer 1 will want expert 3.
  Demand demand{0, {{0, 1}}, {0.1f, 0.2f, 0.0f, 0.9f}};
  LayerPlan plan = Plan(*policy, demand);
  EXPECT_EQ(plan.decisions[0].action, ExpertAction::kResident);
  ASSERT_EQ(plan.prefetches.size(), 1u);
  EXPECT_EQ(plan.prefetches[0].expert, (ExpertRef{1, 3}));
  EXPECT_EQ(plan.prefetches[0].target, FetchTarget::kStaged);
  EXPECT_FALSE(plan.prefetches[0].evict.has_value());  // does not evict a cached expert

  // Layer 1 uses it: promoted, replacing the least recently used expert (1) of layer 1.
  plan = Plan(*policy, {1, {{3, 1}}});
  ASSERT_EQ(plan.decisions[0].action, ExpertAction::kResident);
  EXPECT_TRUE(plan.decisions[0].promote);
  EXPECT_EQ(*plan.decisions[0].evict, (ExpertRef{1, 1}));
  EXPECT_TRUE(plan.discard_staged.empty());
}

TEST(LruPrefetchPolicy, UnusedSpeculativeLoadsAreDiscarded) {
  auto policy = MakeOffloadPolicy("lru-prefetch", Options(1, 2), TinySetup(2, 4, 1, 2, 4));
  policy->InitialPlacement();
  LayerPlan plan = Plan(*policy, {0, {{0, 1}}, {0.0f, 0.5f, 0.4f, 0.1f}});
  ASSERT_EQ(plan.prefetches.size(), 2u);  // experts 1 and 2 (0 is cached)
  EXPECT_EQ(plan.prefetches[0].expert.expert, 1);
  EXPECT_EQ(plan.prefetches[1].expert.expert, 2);
  plan = Plan(*policy, {1, {{3, 1}}});  // neither was right
  EXPECT_EQ(plan.decisions[0].action, ExpertAction::kFetch);
  EXPECT_EQ(plan.discard_staged.size(), 2u);
}

TEST(LruPrefetchPolicy, TopNIncludesCachedExpertsWhichNeedNoLoad) {
  auto policy = MakeOffloadPolicy("lru-prefetch", Options(2, 1), TinySetup(2, 4, 1, 4, 4));
  policy->InitialPlacement();
  // The most likely next expert (0) is cached: nothing to load, and N = 1 stops there.
  const LayerPlan plan = Plan(*policy, {0, {{0, 1}}, {0.9f, 0.0f, 0.0f, 0.5f}});
  EXPECT_TRUE(plan.prefetches.empty());
}

// The speculative loads are the N best-scored experts of the next layer, ties going to the more
// popular (then the lower index) as a stable sort of the popularity order gives them, at expert
// counts around a 16-lane vector's. Scores from a few values, so ties are common, and zeros,
// which are never loaded.
// The first n experts of the popularity order stably sorted by score, highest first, by the
// comparisons a stable insertion makes (a NaN compares false with everything: it keeps its place
// in the insertion, which no sort by a key reproduces).
std::vector<int32_t> StableTopByScore(std::vector<int32_t> by_popularity,
                                      const std::vector<float>& scores, size_t n) {
  std::vector<int32_t> top;
  for (const int32_t expert : by_popularity) {
    size_t at = top.size();
    while (at > 0 && scores[expert] > scores[top[at - 1]]) --at;
    if (at >= n) continue;
    top.insert(top.begin() + static_cast<std::ptrdiff_t>(at), expert);
    if (top.size() > n) top.pop_back();
  }
  return top;
}

// Scores with ties, negative scores, -0 beside +0 and (in some trials) NaN; lists of 1 to 6 (the
// policy keeps up to 4 in registers and longer ones in memory).
TEST(LruPrefetchPolicy, SpeculativeLoadsAreTheBestScoredStablyByPopularity) {
  std::mt19937 random(7);
  const float kScoreValues[] = {-0.5f, -0.0f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f};
  for (const int64_t experts : {3, 8, 16, 17, 40}) {
    for (const int64_t n : {1, 2, 3, 4, 5, 6}) {
      if (n > experts) continue;
      for (int trial = 0; trial < 200; ++trial) {
        policies::OffloadSetup setup = TinySetup(2, experts, 1, 2, n);
        setup.popularity.assign(2, std::vector<double>(static_cast<size_t>(experts)));
        for (auto& layer : setup.popularity)
          for (double& count : layer) count = static_cast<double>(random() % 4);
        auto policy = MakeOffloadPolicy("lru-prefetch", Options(1, n, n), setup);
        policy->InitialPlacement();
        std::vector<float> scores(static_cast<size_t>(experts));
        for (float& score : scores) score = kScoreValues[random() % std::size(kScoreValues)];
        const bool with_nan = trial % 10 == 9;
        if (with_nan) scores[random() % scores.size()] = std::numeric_limits<float>::quiet_NaN();
        std::vector<int32_t> order(static_cast<size_t>(experts));
        for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int32_t>(e);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
          return setup.popularity[1][a] > setup.popularity[1][b];
        });
        const int32_t cached = order[0];  // layer 1's one cached expert, the most popular
        std::vector<int32_t> top = StableTopByScore(order, scores, static_cast<size_t>(n));
        if (!with_nan) {  // the insertion is the stable sort's order (a check of the reference)
          std::stable_sort(order.begin(), order.end(),
                           [&](int32_t a, int32_t b) { return scores[a] > scores[b]; });
          ASSERT_TRUE(std::equal(top.begin(), top.end(), order.begin()));
        }
        std::vector<int32_t> expected;
        for (const int32_t expert : top) {
          if (scores[expert] <= 0) break;
          if (expert != cached) expected.push_back(expert);
        }
        Demand demand{0, {{0, 1}}, scores};
        const LayerPlan plan = Plan(*policy, demand);
        std::vector<int32_t> loaded;
        for (const PrefetchRequest& fetch : plan.prefetches) {
          EXPECT_EQ(fetch.expert.layer, 1);
          loaded.push_back(fetch.expert.expert);
        }
        ASSERT_EQ(loaded, expected) << "E " << experts << " N " << n << " trial " << trial;
      }
    }
  }
}

// Closed form. One layer's cache of k experts out of E, each token routed to K distinct experts
// uniformly at random, independently of every other token; hits are refreshed before misses are
// fetched, so all K lookups of a token see the cache as the previous token left it. The chain's
// transition kernel commutes with relabelling the experts, so the uniform distribution over
// ordered k-lists is stationary; in it the cached set is a uniformly random k-subset, and a
// requested expert is cached with probability exactly k / E (whatever K <= E).
TEST(LruPrefetchPolicy, HitRateOnUniformRoutingIsKOverE) {
  for (const auto& [experts, top_k] : {std::pair<int64_t, int64_t>{8, 2}, {16, 4}}) {
    for (int64_t k = 1; k < experts; k += experts / 4) {
      const int64_t layers = 2;
      auto policy = MakeOffloadPolicy("lru-prefetch", Options(k, 0, 0),
                                      TinySetup(layers, experts, top_k, k * layers, 0));
      policy->InitialPlacement();
      auto routing = routing::MakeUniformRouting(layers, experts, top_k, 42);
      std::vector<std::vector<int32_t>> routed;
      int64_t hits = 0, requests = 0;
      for (int64_t step = 0; step < 20000; ++step) {
        for (int32_t layer = 0; layer < layers; ++layer) {
          routing->Route(step, layer, 1, routed);
          Demand demand{layer, {}};
          std::vector<int32_t> sorted = routed[0];
          std::sort(sorted.begin(), sorted.end());
          for (int32_t e : sorted) demand.experts.push_back({e, 1});
          const LayerPlan plan = Plan(*policy, demand);
          for (const ExpertDecision& d : plan.decisions)
            hits += d.action == ExpertAction::kResident;
          requests += static_cast<int64_t>(plan.decisions.size());
        }
      }
      const double rate = static_cast<double>(hits) / static_cast<double>(requests);
      EXPECT_NEAR(rate, static_cast<double>(k) / static_cast<double>(experts), 0.01)
          << "E " << experts << " K " << top_k << " k " << k;
    }
  }
}

}  // namespace
}  // namespace moelab::policies
