// Serving with offloaded experts (sim/serving_offload_cost.h): the offload simulator's engine run
// one serving iteration at a time adds nothing with every expert resident, takes the decisions
// the offload simulator takes on the same routing, keeps a state per replica, and adds less time
// with more memory.
#include <gtest/gtest.h>

#include <memory>

#include "base/error.h"
#include "fit/cost_source_options.h"
#include "routing/routing_spec.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_offload_cost.h"
#include "tests/sim/sim_test_util.h"

namespace moelab::sim {
namespace {

using testing::Presets;

// `config` with the analytic rooflines of its hardware, as --hardware alone prices it.
SimConfig Priced(SimConfig config) {
  const fit::OffloadSources analytic = fit::AnalyticOffloadSources(
      config.model, config.hardware, config.cpu_threads, model::CostParameters{});
  config.accelerator_costs = analytic.accelerator;
  config.host_costs = analytic.host;
  return config;
}

std::unique_ptr<OffloadIterationPricer> Pricer(const SimConfig& config, int64_t max_sequences,
                                               int64_t kv_tokens) {
  auto compute =
      std::make_unique<CostSourceIterationPricer>(config.accelerator_costs, config.model, 0.0);
  return std::make_unique<OffloadIterationPricer>(std::move(compute), config, max_sequences,
                                                  kv_tokens);
}

// A request's prefill of `prompt` tokens, then `decodes` decodes of it, one iteration each.
std::vector<scheduler::IterationPlan> OneRequest(int64_t prompt, int64_t decodes) {
  std::vector<scheduler::IterationPlan> plans(static_cast<size_t>(decodes + 1));
  plans[0].batch.push_back({0, true, prompt, 0, true});
  for (int64_t i = 1; i <= decodes; ++i)
    plans[static_cast<size_t>(i)].batch.push_back({0, false, 1, prompt + i - 1, true});
  return plans;
}

SimConfig Mixtral(const std::string& policy, double accelerator_gb) {
  SimConfig config = testing::SimConfigFor("mixtral-8x7b", "rtx-3090", policy);
  config.model.bits.experts = 4;
  config.accelerator_bytes = accelerator_gb * 1e9;
  return Priced(config);
}

TEST(ServingOffload, EveryExpertResidentAddsNothing) {
  const SimConfig config = Mixtral("resident", 24);
  auto pricer = Pricer(config, 4, 4096);
  CostSourceIterationPricer alone(config.accelerator_costs, config.model, 0.0);
  for (const scheduler::IterationPlan& plan : OneRequest(300, 12)) {
    const double expected = alone.Seconds(plan);
    EXPECT_NEAR(pricer->Seconds(plan), expected, 1e-12 * expected);
  }
  const nlohmann::json summary = pricer->Summary();
  EXPECT_NEAR(summary["offload_s"].get<double>(), 0, 1e-12);
  EXPECT_EQ(summary["hit_rate"], 1.0);
  EXPECT_EQ(summary["iterations"], 13);
}

// One request served alone is the offload simulator's decode workload: the same passes, token
// counts and routing (the source is a function of pass, layer and token), so on-demand's hits and
// fetches are the same ones.
TEST(ServingOffload, OneRequestTakesTheOffloadSimulatorsDecisions) {
  SimConfig config = Mixtral("on-demand", 12);
  config.workload.kind = WorkloadKind::kDecode;
  config.workload.prompt_tokens = 64;
  config.workload.output_tokens = 10;
  const SimResult offline = SimulateOffload(config);
  auto pricer = Pricer(config, 1, config.workload.KvTokens());
  double total_s = 0;
  for (const scheduler::IterationPlan& plan : OneRequest(64, 9)) total_s += pricer->Seconds(plan);
  const nlohmann::json summary = pricer->Summary();
  EXPECT_EQ(summary["experts"]["activations"], offline.expert_activations);
  EXPECT_EQ(summary["experts"]["hits"].get<int64_t>() +
                summary["experts"]["inflight_hits"].get<int64_t>(),
            offline.hits + offline.inflight_hits);
  EXPECT_EQ(summary["experts"]["demand_fetches"], offline.demand_fetches);
  EXPECT_GT(offline.demand_fetches, 0);
  EXPECT_EQ(summary["bytes"]["host_to_accelerator_expert_weights"],
            offline.bytes_h2d_expert_weights);
  EXPECT_EQ(summary["memory"]["expert_slots"], offline.expert_slots);
  // The waits for those copies are what the serving iterations gained over resident experts.
  EXPECT_GT(summary["offload_s"].get<double>(), 0);
  EXPECT_LT(summary["offload_s"].get<double>(), total_s);
}

TEST(ServingOffload, MoreMemoryAddsLessTime) {
  std::vector<scheduler::IterationPlan> plans;
  for (int64_t request = 0; request < 3; ++request) {
    for (const scheduler::IterationPlan& plan : OneRequest(128 + 64 * request, 20)) {
      plans.push_back(plan);
    }
  }
  double previous_s = std::numeric_limits<double>::infinity();
  for (const double gigabytes : {8.0, 14.0, 22.0, 30.0}) {
    auto pricer = Pricer(Mixtral("on-demand", gigabytes), 4, 4096);
    for (const scheduler::IterationPlan& plan : plans) pricer->Seconds(plan);
    const double offload_s = pricer->Summary()["offload_s"].get<double>();
    EXPECT_LT(offload_s, previous_s) << gigabytes << " GB";
    previous_s = offload_s;
  }
  EXPECT_NEAR(previous_s, 0, 1e-9);  // 30 GB holds every 4-bit expert: none is fetched
}

// Each replica has its own cache and routing: what replica 0 ran before never changes replica 1.
TEST(ServingOffload, EachReplicaKeepsItsOwnState) {
  const SimConfig config = Mixtral("lru-prefetch", 12);
  const std::vector<scheduler::IterationPlan> plans = OneRequest(100, 6);
  auto busy = Pricer(config, 4, 4096);
  for (int round = 0; round < 3; ++round) {
    for (const scheduler::IterationPlan& plan : plans) busy->SecondsOn(0, 0, plan);
  }
  auto fresh = Pricer(config, 4, 4096);
  double start_s = 0;
  for (const scheduler::IterationPlan& plan : plans) {
    const double expected = fresh->SecondsOn(1, start_s, plan);
    EXPECT_EQ(busy->SecondsOn(1, start_s, plan), expected);
    start_s += expected;
  }
}

// An idle replica's prefetches and copies land while no iteration runs: the same iterations with
// gaps between them never wait longer for experts than back to back.
TEST(ServingOffload, IdleTimeLetsCopiesLand) {
  const SimConfig config = Mixtral("lru-prefetch", 12);
  const std::vector<scheduler::IterationPlan> plans = OneRequest(100, 30);
  auto back_to_back = Pricer(config, 4, 4096);
  auto with_gaps = Pricer(config, 4, 4096);
  double start_s = 0, gapped_s = 0;
  for (const scheduler::IterationPlan& plan : plans) {
    start_s += back_to_back->SecondsOn(0, start_s, plan);
    gapped_s += with_gaps->SecondsOn(0, gapped_s, plan) + 0.5;
  }
  const double waited_s = back_to_back->Summary()["offload_s"].get<double>();
  const double gapped_waited_s = with_gaps->Summary()["offload_s"].get<double>();
  EXPECT_GT(waited_s, 0);
  EXPECT_LT(gapped_waited_s, waited_s);
}

TEST(ServingOffload, ATraceIsRefusedByName) {
  SimConfig config = Mixtral("on-demand", 12);
  config.routing = routing::ParseRoutingSpec("trace:some-trace.json");
  try {
    Pricer(config, 4, 4096);
    FAIL() << "a trace was accepted";
  } catch (const base::Error& error) {
    EXPECT_NE(std::string(error.what()).find("--routing trace"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace moelab::sim
