#include "routing/correlated_routing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <vector>

#include "base/error.h"
#include "routing/routing_source.h"
#include "tests/routing/routing_test_util.h"
#include "tests/support/test_paths.h"

namespace moelab::routing {
namespace {

using testing::ErrorOf;
using Routed = std::vector<std::vector<int32_t>>;

Routed RouteOnce(RoutingSource& source, int64_t step, int64_t layer, int64_t tokens) {
  Routed out;
  source.Route(step, layer, tokens, out);
  return out;
}

std::unique_ptr<RoutingSource> Correlated(double locality, double layer, uint64_t seed = 7,
                                          int64_t layers = 8, int64_t experts = 8,
                                          int64_t top_k = 2) {
  CorrelatedRoutingOptions options;
  options.locality = locality;
  options.layer_correlation = layer;
  return MakeCorrelatedRouting(options, layers, experts, top_k, seed);
}

// The layer maps pi_l, learned from a source that always follows the previous layer.
std::vector<std::vector<int32_t>> LayerMaps(int64_t layers, int64_t experts) {
  auto follow = Correlated(0, 1, 1, layers, experts, 1);
  std::vector<std::vector<int32_t>> maps(static_cast<size_t>(layers),
                                         std::vector<int32_t>(static_cast<size_t>(experts), -1));
  for (int64_t step = 0; step < 400; ++step) {
    for (int64_t layer = 1; layer < layers; ++layer) {
      maps[layer][RouteOnce(*follow, step, layer - 1, 1)[0][0]] =
          RouteOnce(*follow, step, layer, 1)[0][0];
    }
  }
  return maps;
}

TEST(CorrelatedRouting, IsAPureFunctionOfSeedStepLayerToken) {
  auto a = Correlated(0.4, 0.6), b = Correlated(0.4, 0.6), c = Correlated(0.4, 0.6, 8);
  // Different call orders and batchings give the same routes.
  const Routed forward = RouteOnce(*a, 5, 3, 16);
  RouteOnce(*b, 9, 7, 3);
  EXPECT_EQ(RouteOnce(*b, 5, 3, 16), forward);
  const Routed first_half = RouteOnce(*b, 5, 3, 8);
  EXPECT_EQ(Routed(forward.begin(), forward.begin() + 8), first_half);
  EXPECT_NE(RouteOnce(*c, 5, 3, 16), forward);
  for (const auto& ranked : RouteOnce(*a, 11, 7, 64)) {
    ASSERT_EQ(ranked.size(), 2u);
    EXPECT_NE(ranked[0], ranked[1]);
    for (int32_t e : ranked) EXPECT_TRUE(e >= 0 && e < 8);
  }
}

// Routed step by step and layer by layer (as the simulator calls it: the memo answers every
// hop, and top-2 uniform routing takes its branch-free path), each node gives the routes that a
// new source, asked for that node alone, finds by walking its chains. Steps narrower, wider and
// as wide as the one before; 2 and 3 experts make the second slot collide with the first often.
TEST(CorrelatedRouting, RoutedInOrderAsEachNodeAlone) {
  const int64_t widths[] = {5, 3, 3, 1, 4, 4, 2, 6, 6, 6, 1, 1};
  for (const int64_t experts : {2, 3, 8, 64}) {
    for (const auto& [locality, layer] :
         {std::pair{0.0, 0.0}, {0.3, 0.5}, {0.8, 0.2}, {0.99, 0.99}, {0.0, 1.0}, {1e-9, 0.0}}) {
      for (const int64_t top_k : {1, 2}) {
        auto in_order = Correlated(locality, layer, 11, 4, experts, top_k);
        for (int64_t step = 0; step < static_cast<int64_t>(std::size(widths)); ++step) {
          for (int64_t l = 0; l < 4; ++l) {
            const Routed routed = RouteOnce(*in_order, step, l, widths[step]);
            auto alone = Correlated(locality, layer, 11, 4, experts, top_k);
            ASSERT_EQ(routed, RouteOnce(*alone, step, l, widths[step]))
                << experts << " experts, top-" << top_k << ", locality " << locality << ", layer "
                << layer << ", step " << step << ", layer " << l;
          }
        }
      }
    }
  }
}

TEST(CorrelatedRouting, LayerMapsDoNotDependOnTheSeed) {
  // Calibration samples another seed and must learn the same pi.
  auto a = Correlated(0, 1, 1), b = Correlated(0, 1, 99);
  for (int64_t step = 0; step < 50; ++step) {
    const int32_t from_a = RouteOnce(*a, step, 0, 1)[0][0],
                  from_b = RouteOnce(*b, step, 0, 1)[0][0];
    if (from_a == from_b) {
      EXPECT_EQ(RouteOnce(*a, step, 1, 1)[0][0], RouteOnce(*b, step, 1, 1)[0][0]);
    }
  }
}

// Temporal locality alone: a slot reuses the previous token's with probability lambda, else a
// fresh slot coincides with one of the previous K experts with probability ~K/E, so the share of
// a token's experts the previous token also used is lambda + (1 - lambda) K / E, less a little
// for slots whose copies collide and are redrawn (measured: 0.451 and 0.731 for 0.475, 0.775).
TEST(CorrelatedRouting, TemporalReuseFollowsLocality) {
  for (const auto& [locality, expected, tolerance] :
       {std::tuple{0.0, 0.25, 0.01}, {0.3, 0.475, 0.03}, {0.7, 0.775, 0.06}}) {
    auto source = Correlated(locality, 0);
    int64_t reused = 0, total = 0;
    Routed previous = RouteOnce(*source, 0, 2, 1);
    for (int64_t step = 1; step < 20000; ++step) {
      const Routed routed = RouteOnce(*source, step, 2, 1);
      for (int32_t e : routed[0]) reused += std::count(previous[0].begin(), previous[0].end(), e);
      total += 2;
      previous = routed;
    }
    EXPECT_NEAR(static_cast<double>(reused) / static_cast<double>(total), expected, tolerance)
        << locality;
  }
}

// Inter-layer correlation alone: slot k at layer l+1 is pi(slot k at layer l) with probability
// rho, else fresh (which is pi(...) by chance with probability 1/E).
TEST(CorrelatedRouting, NextLayerFollowsTheLayerMapWithProbabilityRho) {
  const auto maps = LayerMaps(8, 8);
  for (double rho : {0.0, 0.5, 0.8}) {
    auto source = Correlated(0, rho);
    int64_t followed = 0, total = 0;
    for (int64_t step = 0; step < 3000; ++step) {
      for (int64_t layer = 0; layer + 1 < 8; ++layer) {
        const Routed here = RouteOnce(*source, step, layer, 1),
                     next = RouteOnce(*source, step, layer + 1, 1);
        for (int k = 0; k < 2; ++k) followed += next[0][k] == maps[layer + 1][here[0][k]];
        total += 2;
      }
    }
    EXPECT_NEAR(static_cast<double>(followed) / static_cast<double>(total), rho + (1 - rho) / 8.0,
                0.04)
        << rho;
  }
}

TEST(CorrelatedRouting, KeepsTheMixtralPopularityProfile) {
  const std::filesystem::path table_file =
      testing::SharedDataDir() / "routing/mixtral-8x7b/fiddler_mixtral_popularity_aggregated.csv";
  if (!std::filesystem::exists(table_file)) GTEST_SKIP() << "no " << table_file;
  CorrelatedRoutingOptions options;
  options.popularity = model::LoadPopularityTable(table_file.string());
  options.locality = 0.5;
  options.layer_correlation = 0.5;
  auto source = MakeCorrelatedRouting(options, 32, 8, 2, 3);
  double largest_gap = 0;
  for (int64_t layer = 0; layer < 32; ++layer) {
    std::vector<double> counts(8, 0);
    for (int64_t step = 0; step < 3000; ++step) {
      const Routed routed = RouteOnce(*source, step, layer, 1);
      for (int32_t e : routed[0]) counts[e] += 1;
    }
    double table_total = 0;
    for (double c : options.popularity[layer]) table_total += c;
    for (int e = 0; e < 8; ++e) {
      largest_gap = std::max(
          largest_gap, std::abs(counts[e] / 6000.0 - options.popularity[layer][e] / table_total));
    }
  }
  // Measured 0.036 (0.013 without correlation, the sampling noise): each layer's shares stay
  // within 0.05 of the table's (whose top expert holds 0.15-0.18).
  EXPECT_LT(largest_gap, 0.05);
}

TEST(CorrelatedRouting, ParsedFromTheRoutingSpec) {
  auto source = MakeRoutingSource("correlated:locality=0.3,layer=0.5", 4, 8, 2, 1);
  ASSERT_NE(source, nullptr);
  EXPECT_CONTAINS(source->Describe(), "locality 0.3, layer correlation 0.5");
  EXPECT_CONTAINS(MakeRoutingSource("correlated", 4, 8, 2, 1)->Describe(), "fresh draws uniform");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("correlated:locality=1.5", 4, 8, 2, 1); }),
                  "'locality' must be in [0, 0.99], got 1.5");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("correlated:layer=-1", 4, 8, 2, 1); }),
                  "'layer' must be in [0, 1]");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("correlated:temporal=0.3", 4, 8, 2, 1); }),
                  "unknown key 'temporal'; valid keys: locality=P");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("correlated:locality", 4, 8, 2, 1); }),
                  "is not key=value");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("correlated:layer=x", 4, 8, 2, 1); }),
                  "'layer' value 'x' is not a number");
  // A key twice: the last value was taken without a word.
  EXPECT_CONTAINS(
      ErrorOf([] { MakeRoutingSource("correlated:locality=0.5,locality=0.9", 4, 8, 2, 1); }),
      "'locality' is given twice");
  EXPECT_CONTAINS(
      ErrorOf([] { MakeRoutingSource("correlated:popularity=/nonexistent.csv", 4, 8, 2, 1); }),
      "/nonexistent.csv");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("bogus", 4, 8, 2, 1); }),
                  "correlated:locality=P,layer=P");
}

}  // namespace
}  // namespace moelab::routing
