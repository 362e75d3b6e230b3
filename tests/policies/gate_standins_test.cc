// CountDemand against a plain count, on both of its paths: few routings (sorted) and many (the
// walk over every expert).
#include "policies/gate_standins.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace moelab::policies {
namespace {

// The demand as defined: every expert with tokens, ascending, with its count.
void PlainCount(const std::vector<std::vector<int32_t>>& routed, int64_t experts,
                std::vector<int64_t>& counts, std::vector<ExpertDemand>& demand) {
  counts.assign(static_cast<size_t>(experts), 0);
  for (const auto& token : routed)
    for (int32_t expert : token) ++counts[static_cast<size_t>(expert)];
  demand.clear();
  for (int64_t e = 0; e < experts; ++e)
    if (counts[static_cast<size_t>(e)] > 0)
      demand.push_back({static_cast<int32_t>(e), counts[static_cast<size_t>(e)]});
}

TEST(CountDemand, MatchesAPlainCountOnEitherPath) {
  std::mt19937_64 random(7);
  std::vector<int64_t> counts, expected_counts;
  std::vector<ExpertDemand> demand, expected;
  int cases = 0;
  for (int64_t experts : {1, 2, 8, 16, 64, 160}) {
    for (int64_t tokens : {0, 1, 2, 3, 5, 16}) {
      for (int64_t top_k : {1, 2, 6}) {
        if (top_k > experts) continue;
        for (int repeat = 0; repeat < 20; ++repeat) {
          std::vector<std::vector<int32_t>> routed(static_cast<size_t>(tokens));
          for (auto& token : routed) {
            // Distinct experts a token, in any order (a routing's top-k), from a narrow or the
            // whole range so tokens share experts often or rarely.
            const int64_t range = repeat % 2 == 0 ? std::min<int64_t>(experts, top_k + 1) : experts;
            while (static_cast<int64_t>(token.size()) < top_k) {
              const auto expert = static_cast<int32_t>(random() % static_cast<uint64_t>(range));
              if (std::find(token.begin(), token.end(), expert) == token.end())
                token.push_back(expert);
            }
          }
          // Stale contents from an earlier call must not leak in.
          counts.assign(3, 99);
          demand.assign(2, {5, 5});
          CountDemand(routed, experts, counts, demand);
          PlainCount(routed, experts, expected_counts, expected);
          ASSERT_EQ(counts, expected_counts) << experts << " experts, " << tokens << " tokens";
          ASSERT_EQ(demand.size(), expected.size());
          for (size_t i = 0; i < demand.size(); ++i) {
            EXPECT_EQ(demand[i].expert, expected[i].expert);
            EXPECT_EQ(demand[i].tokens, expected[i].tokens);
          }
          ++cases;
        }
      }
    }
  }
  EXPECT_GT(cases, 1000);
}

TEST(CountDemand, FewRoutingsComeOutAscendingWhateverTheirOrder) {
  // One token routed to 7 then 2 (a descending top-2), then the same expert twice across tokens.
  std::vector<int64_t> counts;
  std::vector<ExpertDemand> demand;
  CountDemand({{7, 2}}, 64, counts, demand);
  ASSERT_EQ(demand.size(), 2u);
  EXPECT_EQ(demand[0].expert, 2);
  EXPECT_EQ(demand[1].expert, 7);
  CountDemand({{9, 3}, {3, 40}}, 64, counts, demand);
  ASSERT_EQ(demand.size(), 3u);
  EXPECT_EQ(demand[0].expert, 3);
  EXPECT_EQ(demand[0].tokens, 2);
  EXPECT_EQ(demand[1].expert, 9);
  EXPECT_EQ(demand[2].expert, 40);
  EXPECT_EQ(counts[3], 2);
  EXPECT_EQ(counts[40], 1);
  // An expert twice in one token (no routing does it; counted as given), and no experts at all.
  CountDemand({{3, 3, 5}}, 64, counts, demand);
  ASSERT_EQ(demand.size(), 2u);
  EXPECT_EQ(demand[0].expert, 3);
  EXPECT_EQ(demand[0].tokens, 2);
  EXPECT_EQ(demand[1].expert, 5);
  EXPECT_EQ(counts[3], 2);
  CountDemand({{}}, 0, counts, demand);
  EXPECT_TRUE(counts.empty());
  EXPECT_TRUE(demand.empty());
}

}  // namespace
}  // namespace moelab::policies
