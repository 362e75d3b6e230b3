// The busiest rank's excess rows under uniform routing: the closed form against seeded sampling of
// the routing itself, and the normal maxima it rests on against their known values.
#include "model/rank_imbalance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "base/error.h"

namespace moelab::model {
namespace {

TEST(RankImbalance, NormalMaximaMatchTheirClosedForms) {
  const double pi = std::acos(-1.0);
  EXPECT_EQ(ExpectedMaxOfStandardNormals(1), 0.0);
  EXPECT_NEAR(ExpectedMaxOfStandardNormals(2), 1.0 / std::sqrt(pi), 1e-6);
  EXPECT_NEAR(ExpectedMaxOfStandardNormals(3), 1.5 / std::sqrt(pi), 1e-6);
  EXPECT_NEAR(ExpectedMaxOfStandardNormals(8), 1.4236, 1e-4);  // tables of normal order statistics
}

// Every token picks top_k distinct experts uniformly; rank r holds experts [r group, (r+1) group).
double SampledExcess(int64_t tokens, int64_t experts, int64_t top_k, int64_t group, int64_t ranks,
                     int64_t layers, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(static_cast<size_t>(experts));
  double excess = 0;
  const double mean = static_cast<double>(tokens * top_k * group) / static_cast<double>(experts);
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<int64_t> rows(static_cast<size_t>(ranks), 0);
    for (int64_t t = 0; t < tokens; ++t) {
      std::iota(ids.begin(), ids.end(), 0);
      for (int64_t j = 0; j < top_k; ++j) {
        std::uniform_int_distribution<int64_t> pick(j, experts - 1);
        std::swap(ids[static_cast<size_t>(j)], ids[static_cast<size_t>(pick(rng))]);
        const int64_t rank = ids[static_cast<size_t>(j)] / group;
        if (rank < ranks) ++rows[static_cast<size_t>(rank)];
      }
    }
    excess += static_cast<double>(*std::max_element(rows.begin(), rows.end())) - mean;
  }
  return excess / static_cast<double>(layers);
}

// The closed form within 5 % of 4000 sampled layers (the samples' own standard error is under
// 2 % of these excesses; the rest is the normal approximation's).
TEST(RankImbalance, BusiestRankExcessMatchesSampledRouting) {
  struct Case {
    int64_t tokens, experts, top_k, group, ranks;
  };
  for (const Case c : {Case{192, 8, 2, 4, 2}, Case{192, 8, 2, 2, 4}, Case{256, 8, 2, 1, 8},
                       Case{512, 64, 6, 16, 4}}) {
    const double closed =
        BusiestRankExcessRows(static_cast<double>(c.tokens), c.experts, c.top_k, c.group, c.ranks);
    const double sampled = SampledExcess(c.tokens, c.experts, c.top_k, c.group, c.ranks, 4000, 7);
    EXPECT_NEAR(closed, sampled, 0.05 * sampled)
        << c.tokens << " tokens, " << c.ranks << " ranks of " << c.group << " of " << c.experts;
  }
}

TEST(RankImbalance, OneRankOrEveryExpertHasNoExcessAndBadShapesAreRefused) {
  EXPECT_EQ(BusiestRankExcessRows(192, 8, 2, 8, 1), 0.0);
  EXPECT_EQ(BusiestRankExcessRows(192, 8, 8, 4, 2), 0.0);  // every token reaches every expert
  EXPECT_GT(BusiestRankExcessRows(192, 8, 2, 4, 2), 0.0);
  EXPECT_THROW(BusiestRankExcessRows(192, 8, 2, 4, 3), base::Error);  // 12 experts held of 8
  EXPECT_THROW(BusiestRankExcessRows(192, 8, 9, 4, 2), base::Error);
  EXPECT_THROW(BusiestRankExcessRows(-1, 8, 2, 4, 2), base::Error);
}

}  // namespace
}  // namespace moelab::model
