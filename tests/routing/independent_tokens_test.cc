// The exact expectations of single-token passes (routing/independent_tokens.h): hand-computed
// pools, a brute-force enumeration of every draw, and the sampler's own Monte Carlo over many
// seeds on correlated routing.
#include "routing/independent_tokens.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/hash.h"
#include "routing/correlated_routing.h"
#include "routing/expert_activation_sampler.h"

namespace moelab::routing {
namespace {

// One layer, two experts, top-1. Segment A routes its 2 tokens to e0 then e1 (q = 1/2, 1/2),
// segment B its 1 token to e0 (q = 1, 0).
IndependentTokenDraws TwoSegments() { return IndependentTokenDraws(1, 2, {2, 1}, {1, 1, 1, 0}); }

TEST(IndependentTokenDraws, HandComputedSmallPool) {
  const IndependentTokenDraws draws = TwoSegments();
  // One token activates one expert whatever it is.
  EXPECT_NEAR(*draws.DistinctExperts(1), 1.0, 1e-15);
  // Both segments: e0 surely (B's token); e1 when A's token is its second: 1 + 1/2.
  EXPECT_NEAR(*draws.DistinctExperts(2), 1.5, 1e-15);
  // Three tokens with replacement, Q = (3/4, 1/4): (1 - (1/4)^3) + (1 - (3/4)^3).
  EXPECT_NEAR(*draws.DistinctExperts(3), 1.5625, 1e-15);
  // e0 ~ Binomial(3, 3/4), e1 ~ Binomial(3, 1/4): experts with 1, 2, 3 tokens.
  const model::ExpertLoad load = draws.LoadWithReplacement(3);
  ASSERT_EQ(load.first_tokens, 1);
  ASSERT_EQ(load.experts.size(), 3u);
  EXPECT_NEAR(load.experts[0], 3 * 0.75 * 0.0625 + 3 * 0.25 * 0.5625, 1e-12);
  EXPECT_NEAR(load.experts[1], 3 * 0.5625 * 0.25 + 3 * 0.0625 * 0.75, 1e-12);
  EXPECT_NEAR(load.experts[2], 0.421875 + 0.015625, 1e-12);
}

TEST(IndependentTokenDraws, RefusesWhatItDoesNotModel) {
  EXPECT_THROW(IndependentTokenDraws(1, 2, {2, 1}, {1, 1, 1}), base::Error);     // counts short
  EXPECT_THROW(IndependentTokenDraws(1, 2, {2, 1}, {3, 1, 1, 0}), base::Error);  // 3 of 2 tokens
  EXPECT_THROW(IndependentTokenDraws(1, 2, {0, 1}, {0, 0, 1, 0}), base::Error);  // empty segment
  const IndependentTokenDraws draws = TwoSegments();
  EXPECT_THROW(draws.DistinctExperts(0), base::Error);
  EXPECT_THROW(draws.LoadWithReplacement(2), base::Error);  // different segments: not tabulated
}

// A random pool of `segments` segments of 1..3 tokens, each token top-`top_k` of `experts` at
// `layers` layers: per token the expert list, and the counts the unit takes.
struct Pool {
  std::vector<std::vector<std::vector<std::vector<int>>>> tokens;  // [segment][token][layer][k]
  std::vector<int64_t> segment_tokens, routed;
};

Pool RandomPool(int64_t segments, int64_t layers, int64_t experts, int64_t top_k, uint64_t seed) {
  Pool pool;
  uint64_t state = seed;
  for (int64_t s = 0; s < segments; ++s) {
    state = base::SplitMix64(state);
    const int64_t length = 1 + static_cast<int64_t>(state % 3);
    pool.segment_tokens.push_back(length);
    std::vector<int64_t> routed(static_cast<size_t>(layers * experts), 0);
    std::vector<std::vector<std::vector<int>>> tokens;
    for (int64_t t = 0; t < length; ++t) {
      std::vector<std::vector<int>> by_layer;
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<int> chosen;
        while (static_cast<int64_t>(chosen.size()) < top_k) {
          state = base::SplitMix64(state);
          // Skewed towards low experts (some experts popular), distinct within the token.
          const int e =
              static_cast<int>((state % 97) * (state % 89) % static_cast<uint64_t>(experts));
          if (std::find(chosen.begin(), chosen.end(), e) == chosen.end()) chosen.push_back(e);
        }
        for (int e : chosen) ++routed[static_cast<size_t>(l * experts + e)];
        by_layer.push_back(chosen);
      }
      tokens.push_back(by_layer);
    }
    pool.tokens.push_back(tokens);
    pool.routed.insert(pool.routed.end(), routed.begin(), routed.end());
  }
  return pool;
}

// Every way the sampler can draw `count` different segments (each subset, each offset), equally
// weighted per subset and per offset: the exact mean distinct experts per layer.
double EnumeratedDistinct(const Pool& pool, int64_t layers, int64_t experts, int64_t count) {
  const int64_t n = static_cast<int64_t>(pool.tokens.size());
  double total = 0, subsets = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if (__builtin_popcount(mask) != count) continue;
    std::vector<int64_t> members;
    for (int64_t s = 0; s < n; ++s)
      if (mask >> s & 1) members.push_back(s);
    // Every offset combination, weighted by 1 / prod(lengths).
    std::vector<int64_t> offset(members.size(), 0);
    double weight_total = 0, subset_total = 0;
    for (;;) {
      double weight = 1;
      for (int64_t s : members) weight /= static_cast<double>(pool.segment_tokens[s]);
      double distinct = 0;
      for (int64_t l = 0; l < layers; ++l) {
        std::vector<bool> hit(static_cast<size_t>(experts), false);
        for (size_t m = 0; m < members.size(); ++m)
          for (int e : pool.tokens[members[m]][offset[m]][l]) hit[e] = true;
        for (bool h : hit) distinct += h ? 1 : 0;
      }
      subset_total += weight * distinct / static_cast<double>(layers);
      weight_total += weight;
      size_t m = 0;
      while (m < members.size() && ++offset[m] == pool.segment_tokens[members[m]]) offset[m++] = 0;
      if (m == members.size()) break;
    }
    EXPECT_NEAR(weight_total, 1.0, 1e-12);
    total += subset_total;
    subsets += 1;
  }
  return total / subsets;
}

TEST(IndependentTokenDraws, DifferentSegmentsMatchEveryDrawEnumerated) {
  const int64_t layers = 2, experts = 6, top_k = 2, segments = 7;
  const Pool pool = RandomPool(segments, layers, experts, top_k, 5);
  const IndependentTokenDraws draws(layers, experts, pool.segment_tokens, pool.routed);
  for (int64_t count = 1; count <= segments; ++count) {
    EXPECT_NEAR(*draws.DistinctExperts(count), EnumeratedDistinct(pool, layers, experts, count),
                1e-12)
        << count << " tokens";
  }
}

// A correlated pool with locality, layer correlation and a skewed popularity: its tokens share
// experts within a segment and across layers, which is what the exact form must keep.
std::unique_ptr<SampledExpertActivation> CorrelatedPool(uint64_t draw_seed) {
  CorrelatedRoutingOptions options;
  options.locality = 0.6;
  options.layer_correlation = 0.5;
  options.popularity.assign(3, {9, 5, 3, 2, 1, 1, 1, 1});
  options.popularity_origin = "test skew";
  const auto source = MakeCorrelatedRouting(options, 3, 8, 2, 17);
  return SampledExpertActivation::FromSource(*source, "correlated test", 3, 8, 2, draw_seed,
                                             /*sequences=*/12, /*positions=*/20);
}

TEST(IndependentTokenDraws, MatchesTheSamplersDrawsOverManySeedsWithinSamplingError) {
  constexpr int kSeeds = 40;
  std::vector<std::unique_ptr<SampledExpertActivation>> pools;
  for (int seed = 0; seed < kSeeds; ++seed) pools.push_back(CorrelatedPool(1000 + seed));
  // 1..12 tokens: different segments; 13 and beyond: with replacement.
  for (int64_t tokens : {1, 3, 7, 12, 13, 40, 300}) {
    const double exact = pools[0]->DistinctExperts(tokens, 1, model::PassKind::kDecode);
    double sum = 0, sum_sq = 0;
    for (const auto& pool : pools) {
      // Every seed's exact value is the same: the draws' seed does not enter the expectation.
      EXPECT_EQ(pool->DistinctExperts(tokens, 1, model::PassKind::kDecode), exact);
      const double drawn = pool->DrawnDistinctExperts(tokens, 1, model::PassKind::kDecode);
      sum += drawn;
      sum_sq += drawn * drawn;
    }
    const double mean = sum / kSeeds;
    const double standard_error =
        std::sqrt(std::max(0.0, sum_sq / kSeeds - mean * mean) / (kSeeds - 1));
    // 4.5 standard errors, plus a floor for the passes where the draws barely vary.
    EXPECT_NEAR(mean, exact, 4.5 * standard_error + 1e-3)
        << tokens << " tokens: drawn " << mean << " +- " << standard_error;
    // Correlated, skewed routing activates fewer experts than uniform's closed form.
    EXPECT_LT(exact, 8.0 * (1.0 - std::pow(0.75, static_cast<double>(tokens))) + 1e-9);
  }
}

TEST(IndependentTokenDraws, LoadWithReplacementMatchesTheDrawsAndSumsToTheDistinctExperts) {
  constexpr int kSeeds = 40;
  const int64_t tokens = 60;  // > 12 segments
  std::vector<double> drawn_mean;
  model::ExpertLoad exact;
  for (int seed = 0; seed < kSeeds; ++seed) {
    const auto pool = CorrelatedPool(2000 + seed);
    if (seed == 0) {
      exact = pool->Load(tokens, 1, model::PassKind::kDecode);
      double experts = 0, routed = 0;
      for (size_t i = 0; i < exact.experts.size(); ++i) {
        experts += exact.experts[i];
        routed +=
            exact.experts[i] * static_cast<double>(exact.first_tokens + static_cast<int64_t>(i));
      }
      EXPECT_NEAR(experts, pool->DistinctExperts(tokens, 1, model::PassKind::kDecode), 1e-9);
      EXPECT_NEAR(routed, 2.0 * tokens, 1e-9);  // every token brings K = 2
    }
    const model::ExpertLoad drawn = pool->DrawnLoad(tokens, 1, model::PassKind::kDecode);
    for (size_t i = 0; i < drawn.experts.size(); ++i) {
      const size_t at = static_cast<size_t>(drawn.first_tokens) + i;
      if (drawn_mean.size() <= at) drawn_mean.resize(at + 1, 0.0);
      drawn_mean[at] += drawn.experts[i] / kSeeds;
    }
  }
  // 40 x 256 draws x 3 layers: each bin's mean is known to about 0.01 experts.
  for (size_t at = 1; at < drawn_mean.size() || at < exact.first_tokens + exact.experts.size();
       ++at) {
    const double got = at < drawn_mean.size() ? drawn_mean[at] : 0.0;
    const int64_t i = static_cast<int64_t>(at) - exact.first_tokens;
    const double want =
        i >= 0 && i < static_cast<int64_t>(exact.experts.size()) ? exact.experts[i] : 0.0;
    EXPECT_NEAR(got, want, 0.04) << "experts with " << at << " tokens";
  }
}

}  // namespace
}  // namespace moelab::routing
