#include "routing/routing_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "model/fiddler.h"
#include "routing/routing_trace.h"
#include "tests/routing/routing_test_util.h"
#include "tests/support/test_paths.h"

namespace moelab::routing {
namespace {

using testing::ErrorOf;
using Routed = std::vector<std::vector<int32_t>>;  // [token][k]

const char kMixtralCsv[] = "routing/mixtral-8x7b/fiddler_mixtral_popularity_aggregated.csv";
const char kMixtralJson[] = "routing/mixtral-8x7b/fiddler_pop_instruct_machine_learning.json";

Routed RouteOnce(RoutingSource& source, int64_t step, int64_t layer, int64_t tokens) {
  Routed out;
  source.Route(step, layer, tokens, out);
  return out;
}

// Routes steps x layers with `tokens` tokens each, in the given step order;
// [step][layer][token][k].
std::vector<std::vector<Routed>> RouteGrid(RoutingSource& source,
                                           const std::vector<int64_t>& step_order, int64_t layers,
                                           int64_t tokens) {
  std::vector<std::vector<Routed>> grid(step_order.size(), std::vector<Routed>(layers));
  for (int64_t step : step_order) {
    for (int64_t layer = layers - 1; layer >= 0; --layer) {
      grid[step][layer] = RouteOnce(source, step, layer, tokens);
    }
  }
  return grid;
}

void ExpectDistinctInRange(const Routed& routed, int64_t tokens, int64_t num_experts,
                           int64_t top_k) {
  ASSERT_EQ(routed.size(), static_cast<size_t>(tokens));
  for (const std::vector<int32_t>& ranked : routed) {
    ASSERT_EQ(ranked.size(), static_cast<size_t>(top_k));
    const std::set<int32_t> distinct(ranked.begin(), ranked.end());
    EXPECT_EQ(distinct.size(), ranked.size());
    for (int32_t expert : ranked) {
      EXPECT_GE(expert, 0);
      EXPECT_LT(expert, num_experts);
    }
  }
}

std::filesystem::path SharedFile(const std::string& relative) {
  return testing::SharedDataDir() / relative;
}

// ---------------------------------------------------------------------------------------------
// Uniform routing

TEST(UniformRouting, SameSeedSameOutputDifferentSeedDiffers) {
  auto a = MakeUniformRouting(4, 8, 2, 7);
  auto b = MakeUniformRouting(4, 8, 2, 7);
  auto c = MakeUniformRouting(4, 8, 2, 8);
  const std::vector<int64_t> order = {0, 1, 2, 3, 4};
  EXPECT_EQ(RouteGrid(*a, order, 4, 16), RouteGrid(*b, order, 4, 16));
  EXPECT_NE(RouteGrid(*a, order, 4, 16), RouteGrid(*c, order, 4, 16));
  // Steps and layers are decorrelated too.
  EXPECT_NE(RouteOnce(*a, 0, 0, 16), RouteOnce(*a, 1, 0, 16));
  EXPECT_NE(RouteOnce(*a, 0, 0, 16), RouteOnce(*a, 0, 1, 16));
  EXPECT_NE(a->Describe().find("uniform"), std::string::npos);
  EXPECT_NE(a->Describe().find("seed 7"), std::string::npos);
}

TEST(UniformRouting, IndependentOfCallOrderAndBatchSize) {
  auto forward = MakeUniformRouting(3, 16, 4, 11);
  auto backward = MakeUniformRouting(3, 16, 4, 11);
  EXPECT_EQ(RouteGrid(*forward, {0, 1, 2, 3}, 3, 9), RouteGrid(*backward, {3, 2, 1, 0}, 3, 9));
  // Routing more tokens at once does not change the earlier tokens' experts.
  const Routed ten = RouteOnce(*forward, 5, 1, 10);
  const Routed four = RouteOnce(*backward, 5, 1, 4);
  EXPECT_TRUE(std::equal(four.begin(), four.end(), ten.begin()));
  // `out` is resized whatever it held before.
  Routed reused(100, std::vector<int32_t>(9, -1));
  forward->Route(5, 1, 4, reused);
  EXPECT_EQ(reused, four);
}

TEST(UniformRouting, KDistinctExpertsInRange) {
  struct Shape {
    int64_t experts, top_k;
  };
  for (const Shape& shape :
       {Shape{8, 2}, Shape{64, 6}, Shape{256, 8}, Shape{4, 4}, Shape{1, 1}, Shape{3, 1}}) {
    SCOPED_TRACE("E = " + std::to_string(shape.experts) + ", K = " + std::to_string(shape.top_k));
    auto source = MakeUniformRouting(2, shape.experts, shape.top_k, 3);
    ExpectDistinctInRange(RouteOnce(*source, 0, 1, 2000), 2000, shape.experts, shape.top_k);
  }
  auto source = MakeUniformRouting(2, 8, 2, 3);
  EXPECT_TRUE(RouteOnce(*source, 0, 0, 0).empty());
}

// Each expert is chosen by a token with probability K/E, independently across tokens: its count
// over N tokens is Binomial(N, K/E). Same for the top-ranked slot alone with 1/E.
void ExpectUniformFrequencies(int64_t num_experts, int64_t top_k, int64_t tokens, uint64_t seed) {
  SCOPED_TRACE("E = " + std::to_string(num_experts) + ", K = " + std::to_string(top_k));
  auto source = MakeUniformRouting(4, num_experts, top_k, seed);
  std::vector<int64_t> chosen(num_experts, 0), first(num_experts, 0);
  const int64_t per_step = 1000;
  for (int64_t step = 0; step < tokens / per_step; ++step) {
    const Routed routed = RouteOnce(*source, step, 2, per_step);
    ExpectDistinctInRange(routed, per_step, num_experts, top_k);
    for (const auto& ranked : routed) {
      ++first[ranked[0]];
      for (int32_t expert : ranked) ++chosen[expert];
    }
  }
  const double n = static_cast<double>(tokens);
  const double p = static_cast<double>(top_k) / num_experts;
  const double q = 1.0 / num_experts;
  for (int64_t expert = 0; expert < num_experts; ++expert) {
    EXPECT_LE(std::fabs(chosen[expert] - n * p), 4 * std::sqrt(n * p * (1 - p)))
        << "expert " << expert;
    EXPECT_LE(std::fabs(first[expert] - n * q), 4 * std::sqrt(n * q * (1 - q)))
        << "expert " << expert;
  }
}

TEST(UniformRouting, FrequenciesWithinFourSigmaOfUniform) {
  ExpectUniformFrequencies(8, 2, 200000, 1);
  ExpectUniformFrequencies(64, 8, 100000, 2);
  ExpectUniformFrequencies(5, 4, 100000, 3);
}

TEST(UniformRouting, RejectsBadModelAndRequests) {
  EXPECT_NE(ErrorOf([] {
              MakeUniformRouting(4, 8, 9, 1);
            }).find("top_k must be in [1, num_experts = 8], got 9"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { MakeUniformRouting(4, 8, 0, 1); }).find("top_k"), std::string::npos);
  EXPECT_NE(ErrorOf([] { MakeUniformRouting(0, 8, 2, 1); }).find("num_layers"), std::string::npos);
  EXPECT_NE(ErrorOf([] { MakeUniformRouting(4, 0, 1, 1); }).find("num_experts"), std::string::npos);
  auto source = MakeUniformRouting(4, 8, 2, 1);
  Routed out;
  EXPECT_CONTAINS(ErrorOf([&] { source->Route(0, 4, 1, out); }),
                  "layer 4 is out of range, the model has 4 MoE layers");
  EXPECT_CONTAINS(ErrorOf([&] { source->Route(0, -1, 1, out); }), "layer -1 is out of range");
  EXPECT_CONTAINS(ErrorOf([&] { source->Route(-1, 0, 1, out); }), "step must be >= 0");
  EXPECT_CONTAINS(ErrorOf([&] { source->Route(0, 0, -1, out); }), "tokens must be >= 0");
}

// ---------------------------------------------------------------------------------------------
// Popularity routing

TEST(PopularityRouting, TracksRealMixtralTable) {
  const std::filesystem::path csv = SharedFile(kMixtralCsv);
  if (!std::filesystem::exists(csv)) GTEST_SKIP() << "shared routing data not present: " << csv;
  const model::PopularityTable table = model::LoadPopularityTable(csv.string());
  auto source = MakePopularityRouting(table, 32, 8, 2, 1, csv.string());
  const int64_t tokens = 200000, per_step = 5000, top_k = 2;
  // Layer 6 is the table's most skewed for this sampler, layer 1 has the rarest expert.
  for (int64_t layer : {1, 6, 31}) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    std::vector<int64_t> chosen(8, 0);
    for (int64_t step = 0; step < tokens / per_step; ++step) {
      const Routed routed = RouteOnce(*source, step, layer, per_step);
      if (step == 0) ExpectDistinctInRange(routed, per_step, 8, top_k);
      for (const auto& ranked : routed) {
        for (int32_t expert : ranked) ++chosen[expert];
      }
    }
    double total = 0;
    for (double count : table[layer]) total += count;
    std::vector<double> p(8);
    for (int e = 0; e < 8; ++e) p[e] = table[layer][e] / total;
    for (int e = 0; e < 8; ++e) {
      const double share = static_cast<double>(chosen[e]) / (tokens * top_k);
      // Tracks the table's share of activations...
      EXPECT_LT(std::fabs(share - p[e]), 0.01) << "expert " << e;
      // ...and exactly the inclusion probability of two successive draws without replacement:
      // pi_e = p_e + sum_{j != e} p_j p_e / (1 - p_j); the count is Binomial(tokens, pi_e).
      double inclusion = p[e];
      for (int j = 0; j < 8; ++j) {
        if (j != e) inclusion += p[j] * p[e] / (1 - p[j]);
      }
      const double sigma = std::sqrt(tokens * inclusion * (1 - inclusion));
      EXPECT_LE(std::fabs(chosen[e] - tokens * inclusion), 4 * sigma) << "expert " << e;
    }
  }
}

TEST(PopularityRouting, DeterministicAndIndependentOfCallOrder) {
  const model::PopularityTable table = {
      {1, 2, 3, 4, 5, 6}, {6, 0, 4, 3, 2, 1}, {1, 1, 1, 1, 1, 100}};
  auto a = MakePopularityRouting(table, 3, 6, 3, 5);
  auto b = MakePopularityRouting(table, 3, 6, 3, 5);
  auto c = MakePopularityRouting(table, 3, 6, 3, 6);
  EXPECT_EQ(RouteGrid(*a, {0, 1, 2, 3}, 3, 50), RouteGrid(*b, {3, 2, 1, 0}, 3, 50));
  EXPECT_NE(RouteGrid(*a, {0, 1, 2, 3}, 3, 50), RouteGrid(*c, {0, 1, 2, 3}, 3, 50));
  const Routed many = RouteOnce(*a, 9, 0, 40);
  const Routed few = RouteOnce(*b, 9, 0, 7);
  EXPECT_TRUE(std::equal(few.begin(), few.end(), many.begin()));
  // Same seed, different kind of source: not the same stream.
  auto uniform = MakeUniformRouting(3, 6, 3, 5);
  auto flat = MakePopularityRouting({{1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1}}, 3,
                                    6, 3, 5);
  EXPECT_NE(RouteOnce(*uniform, 0, 0, 50), RouteOnce(*flat, 0, 0, 50));
  EXPECT_NE(a->Describe().find("popularity"), std::string::npos);
}

TEST(PopularityRouting, ZeroCountsNeverChosenAndProportionalDraws) {
  auto source = MakePopularityRouting({{0, 5, 5, 0, 1}}, 1, 5, 3, 2);
  for (const auto& ranked : RouteOnce(*source, 0, 0, 500)) {
    EXPECT_EQ(std::set<int32_t>(ranked.begin(), ranked.end()), (std::set<int32_t>{1, 2, 4}));
  }
  // K = 1: a single draw proportional to the counts (1 : 3).
  auto single = MakePopularityRouting({{1, 3}}, 1, 2, 1, 4);
  const int64_t tokens = 100000;
  int64_t second = 0;
  for (const auto& ranked : RouteOnce(*single, 0, 0, tokens)) second += ranked[0];
  EXPECT_LE(std::fabs(second - 0.75 * tokens), 4 * std::sqrt(tokens * 0.75 * 0.25));
  // Fractional counts (shares) work as well as integers.
  auto shares = MakePopularityRouting({{0.25, 0.75}}, 1, 2, 1, 4);
  EXPECT_EQ(RouteOnce(*shares, 0, 0, 1000), RouteOnce(*single, 0, 0, 1000));
}

TEST(PopularityRouting, RejectsMismatchedTables) {
  const model::PopularityTable table(32, std::vector<double>(8, 1.0));
  const std::string shape = ErrorOf([&] { MakePopularityRouting(table, 24, 64, 6, 1, "pop.csv"); });
  EXPECT_CONTAINS(shape, "pop.csv");
  EXPECT_CONTAINS(shape, "32 layers x 8 experts");
  EXPECT_CONTAINS(shape, "24 MoE layers x 64 experts");
  EXPECT_CONTAINS(ErrorOf([&] { MakePopularityRouting(table, 32, 7, 2, 1); }),
                  "32 layers x 8 experts");
  const model::PopularityTable sparse = {{1, 0, 0, 0}, {1, 1, 0, 0}};
  EXPECT_CONTAINS(ErrorOf([&] { MakePopularityRouting(sparse, 2, 4, 2, 1, "pop.csv"); }),
                  "pop.csv: layer 0 has 1 experts with nonzero counts, fewer than top_k = 2");
  EXPECT_NO_THROW(MakePopularityRouting(sparse, 2, 4, 1, 1));
  EXPECT_CONTAINS(ErrorOf([] { MakePopularityRouting({{1, -1}}, 1, 2, 1, 1); }), "finite and >= 0");
}

// ---------------------------------------------------------------------------------------------
// Reproducibility across builds and threads

// Pinned outputs: the executor and the simulator, built separately or on another machine, must
// route identically. A change here changes every synthetic trace: bump the documentation with it.
TEST(RoutingReproducibility, GoldenValues) {
  auto uniform = MakeUniformRouting(32, 8, 2, 1);
  EXPECT_EQ(RouteOnce(*uniform, 0, 0, 3), (Routed{{1, 2}, {4, 3}, {2, 1}}));
  EXPECT_EQ(RouteOnce(*uniform, 1, 1, 2), (Routed{{0, 6}, {3, 7}}));
  auto wide = MakeUniformRouting(1, 256, 8, 42);
  EXPECT_EQ(RouteOnce(*wide, 1000000, 0, 2),
            (Routed{{15, 208, 13, 196, 42, 142, 114, 30}, {115, 145, 209, 168, 17, 148, 73, 151}}));
  auto popularity = MakePopularityRouting({{1, 2, 3, 4, 0, 10}}, 1, 6, 3, 1);
  EXPECT_EQ(RouteOnce(*popularity, 4, 0, 4), (Routed{{5, 3, 2}, {5, 3, 1}, {5, 2, 3}, {2, 5, 1}}));
}

TEST(RoutingReproducibility, SameOutputWhateverTheThreadCount) {
  const model::PopularityTable table = {
      {5, 1, 1, 2, 8, 3, 0, 4}, {1, 1, 1, 1, 1, 1, 1, 1}, {9, 8, 7, 6, 5, 4, 3, 2}};
  const std::vector<std::function<std::unique_ptr<RoutingSource>()>> makers = {
      [] { return MakeUniformRouting(3, 8, 3, 17); },
      [&] { return MakePopularityRouting(table, 3, 8, 3, 17); }};
  for (const auto& make : makers) {
    auto serial_source = make();
    const std::vector<std::vector<Routed>> serial =
        RouteGrid(*serial_source, {0, 1, 2, 3, 4, 5, 6, 7}, 3, 64);
    for (int threads : {2, 3, 8}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      auto shared = make();  // one source shared by every thread, as an engine would
      std::vector<std::vector<Routed>> parallel(8, std::vector<Routed>(3));
      std::vector<std::thread> workers;
      for (int worker = 0; worker < threads; ++worker) {
        workers.emplace_back([&, worker] {
          for (int64_t cell = worker; cell < 8 * 3; cell += threads) {
            shared->Route(cell / 3, cell % 3, 64, parallel[cell / 3][cell % 3]);
          }
        });
      }
      for (std::thread& thread : workers) thread.join();
      EXPECT_EQ(parallel, serial);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Trace replay

// What the executor does: record its routing of a few steps into a trace.
RoutingTrace Record(RoutingSource& source, int64_t layers, int64_t experts, int64_t top_k) {
  RoutingTrace trace;
  trace.num_layers = layers;
  trace.num_experts = experts;
  trace.top_k = top_k;
  trace.source = source.Describe();
  const std::vector<std::pair<std::string, int64_t>> steps = {
      {"prefill", 12}, {"decode", 2}, {"verify", 6}};
  for (size_t step = 0; step < steps.size(); ++step) {
    RoutingStep& routed = trace.steps.emplace_back();
    routed.kind = steps[step].first;
    routed.tokens = steps[step].second;
    for (int64_t layer = 0; layer < layers; ++layer) {
      routed.experts.push_back(RouteOnce(source, step, layer, routed.tokens));
    }
  }
  return trace;
}

TEST(TraceRouting, ReplaysTheTraceAndErrorsPastItsEnd) {
  auto uniform = MakeUniformRouting(3, 8, 2, 21);
  const RoutingTrace trace = Record(*uniform, 3, 8, 2);
  auto replay = MakeTraceRouting(trace, 3, 8, 2, "run.json");
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    for (int64_t layer = 2; layer >= 0; --layer) {
      EXPECT_EQ(RouteOnce(*replay, step, layer, trace.steps[step].tokens),
                trace.steps[step].experts[layer]);
    }
  }
  Routed out;
  EXPECT_EQ(ErrorOf([&] { replay->Route(3, 0, 2, out); }),
            "run.json: asked for step 3, but the trace has only 3 steps (0..2)");
  EXPECT_EQ(ErrorOf([&] { replay->Route(1, 0, 3, out); }),
            "run.json: asked for 3 tokens at step 1 (decode), but the trace's step has 2 tokens");
  EXPECT_CONTAINS(ErrorOf([&] { replay->Route(1, 3, 2, out); }),
                  "run.json: layer 3 is out of range");
  EXPECT_CONTAINS(replay->Describe(), "run.json");
  EXPECT_CONTAINS(replay->Describe(), "3 steps");
  // Without an origin, the trace is named by its source.
  auto unnamed = MakeTraceRouting(trace, 3, 8, 2);
  EXPECT_CONTAINS(ErrorOf([&] { unnamed->Route(5, 0, 2, out); }), "routing trace 'uniform routing");
}

// Stored reads the trace in place (the simulator's fast path): what Route copies, with Route's
// errors; sources that compute their routing store nothing.
TEST(TraceRouting, StoredIsWhatRouteCopiesWithTheSameErrors) {
  auto uniform = MakeUniformRouting(3, 8, 2, 21);
  const RoutingTrace trace = Record(*uniform, 3, 8, 2);
  auto replay = MakeTraceRouting(trace, 3, 8, 2, "run.json");
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    for (int64_t layer = 0; layer < 3; ++layer) {
      const Routed* stored = replay->Stored(step, layer, trace.steps[step].tokens);
      ASSERT_NE(stored, nullptr);
      EXPECT_EQ(*stored, trace.steps[step].experts[layer]);
      EXPECT_EQ(*stored, RouteOnce(*replay, step, layer, trace.steps[step].tokens));
    }
  }
  EXPECT_EQ(ErrorOf([&] { replay->Stored(3, 0, 2); }),
            "run.json: asked for step 3, but the trace has only 3 steps (0..2)");
  EXPECT_EQ(ErrorOf([&] { replay->Stored(1, 0, 3); }),
            "run.json: asked for 3 tokens at step 1 (decode), but the trace's step has 2 tokens");
  EXPECT_CONTAINS(ErrorOf([&] { replay->Stored(1, 3, 2); }), "run.json: layer 3 is out of range");
  EXPECT_EQ(uniform->Stored(0, 0, 2), nullptr);
}

TEST(TraceRouting, RejectsTraceOfAnotherModelOrInvalidTrace) {
  auto uniform = MakeUniformRouting(3, 8, 2, 21);
  const RoutingTrace trace = Record(*uniform, 3, 8, 2);
  const std::string message = ErrorOf([&] { MakeTraceRouting(trace, 3, 16, 2, "run.json"); });
  EXPECT_CONTAINS(message, "run.json: the trace has 3 MoE layers x 8 experts, top-2");
  EXPECT_CONTAINS(message, "the model has 3 MoE layers x 16 experts, top-2");
  EXPECT_CONTAINS(ErrorOf([&] { MakeTraceRouting(trace, 4, 8, 2, "run.json"); }),
                  "the model has 4 MoE layers");
  EXPECT_CONTAINS(ErrorOf([&] { MakeTraceRouting(trace, 3, 8, 1, "run.json"); }), "top-1");
  RoutingTrace broken = trace;
  broken.steps[2].experts[1][0] = {5, 5};
  EXPECT_CONTAINS(ErrorOf([&] { MakeTraceRouting(broken, 3, 8, 2, "run.json"); }),
                  "run.json: field 'steps[2].experts': layer 1 token 0 routes to expert 5 twice");
}

TEST(TraceRouting, RecordSaveLoadReplayIsTheSameRouting) {
  const std::filesystem::path dir = testing::MakeTempDir("routing-source");
  const std::string path = (dir / "recorded.json").string();
  auto uniform = MakeUniformRouting(2, 16, 4, 99);
  const RoutingTrace trace = Record(*uniform, 2, 16, 4);
  SaveRoutingTrace(trace, path);
  auto replay = MakeRoutingSource("trace:" + path, 2, 16, 4, 0);
  ASSERT_NE(replay, nullptr);
  auto fresh = MakeUniformRouting(2, 16, 4, 99);
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    for (int64_t layer = 0; layer < 2; ++layer) {
      EXPECT_EQ(RouteOnce(*replay, step, layer, trace.steps[step].tokens),
                RouteOnce(*fresh, step, layer, trace.steps[step].tokens));
    }
  }
  std::filesystem::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------
// MakeRoutingSource

TEST(MakeRoutingSource, GateUniformAndTraceForms) {
  EXPECT_EQ(MakeRoutingSource("gate", 32, 8, 2, 1), nullptr);
  auto uniform = MakeRoutingSource("uniform", 32, 8, 2, 7);
  ASSERT_NE(uniform, nullptr);
  auto direct = MakeUniformRouting(32, 8, 2, 7);
  EXPECT_EQ(RouteOnce(*uniform, 3, 31, 20), RouteOnce(*direct, 3, 31, 20));
  EXPECT_EQ(uniform->Describe(), direct->Describe());

  const std::filesystem::path dir = testing::MakeTempDir("routing-source");
  const RoutingTrace trace = Record(*direct, 32, 8, 2);
  const std::string path = (dir / "trace.json").string();
  SaveRoutingTrace(trace, path);
  for (const std::string& spec : {"trace:" + path, path}) {
    SCOPED_TRACE(spec);
    auto replay = MakeRoutingSource(spec, 32, 8, 2, 1);
    ASSERT_NE(replay, nullptr);
    EXPECT_EQ(RouteOnce(*replay, 1, 5, 2), trace.steps[1].experts[5]);
    EXPECT_CONTAINS(replay->Describe(), path);
  }
  // A bare path without ".json" is a trace when the file exists.
  const std::string plain = (dir / "trace").string();
  std::filesystem::copy_file(path, plain);
  EXPECT_NE(MakeRoutingSource(plain, 32, 8, 2, 1), nullptr);
  EXPECT_CONTAINS(ErrorOf([&] { MakeRoutingSource(path, 32, 16, 2, 1); }),
                  path + ": the trace has");
  std::filesystem::remove_all(dir);
}

TEST(MakeRoutingSource, PopularityFromCsvAndJson) {
  const std::filesystem::path csv = SharedFile(kMixtralCsv);
  const std::filesystem::path json = SharedFile(kMixtralJson);
  if (!std::filesystem::exists(csv) || !std::filesystem::exists(json)) {
    GTEST_SKIP() << "shared routing data not present: " << csv << ", " << json;
  }
  auto from_csv = MakeRoutingSource("popularity:" + csv.string(), 32, 8, 2, 3);
  ASSERT_NE(from_csv, nullptr);
  auto direct = MakePopularityRouting(model::LoadPopularityTable(csv.string()), 32, 8, 2, 3);
  EXPECT_EQ(RouteOnce(*from_csv, 0, 4, 100), RouteOnce(*direct, 0, 4, 100));
  EXPECT_CONTAINS(from_csv->Describe(), csv.string());
  auto from_json = MakeRoutingSource("popularity:" + json.string(), 32, 8, 2, 3);
  ASSERT_NE(from_json, nullptr);
  ExpectDistinctInRange(RouteOnce(*from_json, 0, 0, 100), 100, 8, 2);
  const std::string mismatch =
      ErrorOf([&] { MakeRoutingSource("popularity:" + csv.string(), 24, 64, 6, 1); });
  EXPECT_CONTAINS(mismatch, csv.string());
  EXPECT_CONTAINS(mismatch, "32 layers x 8 experts, but the model has 24 MoE layers x 64 experts");
}

TEST(MakeRoutingSource, UnknownFormsListTheValidOnes) {
  for (const std::string spec : {"unifrom", "", "random", "gate:1", "uniform:7", "pop:x.csv"}) {
    SCOPED_TRACE(spec);
    const std::string message = ErrorOf([&] { MakeRoutingSource(spec, 32, 8, 2, 1); });
    EXPECT_CONTAINS(message, "routing '" + spec + "'");
    for (const char* form : {"\"gate\"", "\"uniform\"", "\"popularity:FILE\"", "\"trace:FILE\""}) {
      EXPECT_CONTAINS(message, form);
    }
  }
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("popularity:", 32, 8, 2, 1); }),
                  "missing FILE after 'popularity:'");
  EXPECT_CONTAINS(ErrorOf([] { MakeRoutingSource("trace:", 32, 8, 2, 1); }),
                  "missing FILE after 'trace:'");
  const std::filesystem::path dir = testing::MakeTempDir("routing-source");
  const std::string absent = (dir / "absent.json").string();
  EXPECT_CONTAINS(ErrorOf([&] { MakeRoutingSource("trace:" + absent, 32, 8, 2, 1); }), absent);
  EXPECT_CONTAINS(ErrorOf([&] { MakeRoutingSource(absent, 32, 8, 2, 1); }), absent);
  const std::string absent_csv = (dir / "absent.csv").string();
  EXPECT_CONTAINS(ErrorOf([&] { MakeRoutingSource("popularity:" + absent_csv, 32, 8, 2, 1); }),
                  absent_csv);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::routing
