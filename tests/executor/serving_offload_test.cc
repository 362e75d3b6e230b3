// Offloading composed with serving: `moelab serve --offload` builds the target as `moelab run
// --offload` does (routed experts in the expert store, a RAM cache driven by the policy), and the
// serving engine's tokens are bit-identical to serving with every expert in RAM, through chunked
// prefills, mixed batches and preemptions; and the serving simulator's offload engine
// (sim serve --offload) takes the executor's decisions, iteration by iteration.
#include <gtest/gtest.h>

#include "executor/offload/expert_store.h"
#include "executor/offload/offload_runtime.h"
#include "executor/serving_model.h"
#include "fit/cost_source_options.h"
#include "model/parameter_count.h"
#include "policies/calibration.h"
#include "policies/memory_plan.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_offload_cost.h"
#include "executor/serving_replay.h"
#include "tests/executor/offload_fixtures.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

scheduler::SchedulerConfig Scheduler(int64_t kv_blocks) {
  scheduler::SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = kv_blocks;
  config.max_running_sequences = 3;
  config.max_batched_tokens = 12;
  config.prefill_chunk_tokens = 6;
  config.max_sequence_tokens = 40;
  return config;
}

TEST(ServingOffload, TokensEqualServingWithEveryExpertInRam) {
  offload::TempDir dir;
  const model::PresetStore presets = model::PresetStore::Default();
  RunRequest plain = testing::SmallRunRequest();
  plain.threads = 2;
  RunRequest offloaded = plain;
  offload::OffloadOptions options;
  options.policy = "on-demand";
  options.expert_memory_bytes = 8 << 20;  // about 8 of the 32 experts of 0.8 MB
  options.offload_dir = dir.path.string();
  offloaded.offload = options;
  for (const int64_t kv_blocks : {100, 9}) {
    const scheduler::SchedulerConfig config = Scheduler(kv_blocks);
    auto in_ram = BuildServingModel(plain, config, presets);
    auto from_store = BuildServingModel(offloaded, config, presets);
    ASSERT_NE(from_store->offload_runtime, nullptr);
    const int64_t vocab = in_ram->model->config().vocab_size;
    std::vector<ReplayArrival> arrivals;
    for (int64_t i = 0; i < 5; ++i) {
      ReplayArrival a;
      a.request.id = i;
      a.request.prompt = SyntheticPrompts(1, 7 + i * 3, vocab, 50 + i)[0];
      a.request.max_tokens = 8 - i % 2;
      a.submit_before_iteration = i;
      arrivals.push_back(a);
    }
    const ReplayResult expected = ReplayByIteration(*in_ram->model, config, arrivals);
    const ReplayResult got = ReplayByIteration(*from_store->model, config, arrivals);
    EXPECT_EQ(got.plans, expected.plans) << kv_blocks;
    EXPECT_EQ(got.tokens, expected.tokens) << kv_blocks;
    if (kv_blocks == 9) {
      int64_t preemptions = 0;
      for (const auto& plan : got.plans) preemptions += plan.preempted.size();
      EXPECT_GT(preemptions, 0);
    }
  }
}

// The same served iterations through the executor's offload runtime and through the serving
// simulator's offload engine (sim::OffloadIterationPricer, what sim serve --offload runs), both
// routing by the same seeded source (the executor's passes forced to it), the executor's gate
// signals replayed in the simulator, the same calibration and expert slots: the decision logs are
// equal, entry for entry.
struct ServedDecisions {
  offload::OffloadStats executor;
  sim::SimResult simulator;
};

ServedDecisions ServeBoth(const std::string& policy, const policies::PolicyOptions& policy_options,
                          int64_t slots, bool replay_signals) {
  constexpr uint64_t kSeed = 21;
  offload::TempDir dir;
  const model::PresetStore presets = model::PresetStore::Default();
  RunRequest request = testing::SmallRunRequest();
  request.threads = 2;
  const scheduler::SchedulerConfig config = Scheduler(100);
  auto in_ram = BuildServingModel(request, config, presets);
  const model::MoeModelSpec spec = SpecFromExecutorConfig(in_ram->model->config());
  const routing::RoutingSpec uniform = routing::ParseRoutingSpec("uniform");
  const policies::RoutingCalibration calibration =
      policies::CalibrateRouting(uniform, spec.num_moe_layers(), spec.moe->num_experts,
                                 spec.moe->top_k, kSeed, policies::CalibrationOptions{});
  offload::OffloadOptions options;
  options.policy = policy;
  options.policy_options = policy_options;
  // The runtime's budget counts the store's payload per expert (the simulator's ExpertBytes plus
  // the formats' scales): `slots` of them.
  options.expert_memory_bytes =
      slots * offload::ExpertStoreKeyFor(in_ram->model->config(), "").payload_bytes();
  options.offload_dir = dir.path.string();
  options.popularity = calibration.popularity;
  options.history = calibration.history;
  options.seed = kSeed;
  options.record_decisions = true;
  request.offload = options;
  auto served = BuildServingModel(request, config, presets);
  std::vector<ReplayArrival> arrivals;
  for (int64_t i = 0; i < 4; ++i) {
    ReplayArrival a;
    a.request.id = i;
    a.request.prompt = SyntheticPrompts(1, 5 + i * 4, spec.vocab_size, 70 + i)[0];
    a.request.max_tokens = 6 + i % 2;
    a.submit_before_iteration = 2 * i;
    arrivals.push_back(a);
  }
  const std::unique_ptr<routing::RoutingSource> routing = routing::MakeRoutingSource(
      uniform, spec.num_moe_layers(), spec.moe->num_experts, spec.moe->top_k, kSeed);
  const ReplayResult replay =
      ReplayByIteration(*served->model, config, arrivals, 1000, {}, routing.get());
  ServedDecisions result;
  result.executor = served->offload_runtime->Stats();

  sim::SimConfig sim;
  sim.model = spec;
  sim.hardware = presets.LoadHardware("rtx-3090");
  sim.policy = policy;
  sim.policy_options = policy_options;
  sim.routing = uniform;
  sim.seed = kSeed;
  const int64_t kv_tokens = config.kv_blocks * config.kv_block_tokens;
  const policies::ModelMemory memory = policies::ModelMemoryOf(spec, sim.kv_bits, kv_tokens);
  double dense = 0;
  for (const double bytes : memory.dense_layer_bytes) dense += bytes;
  sim.accelerator_bytes =
      memory.fixed_bytes + dense +
      (static_cast<double>(slots) + 0.5) * static_cast<double>(model::ExpertBytes(spec));
  if (replay_signals)
    sim.gate_signals = std::make_shared<policies::GateSignals>(result.executor.signals);
  sim.record_decisions = true;
  const fit::OffloadSources rooflines =
      fit::AnalyticOffloadSources(sim.model, sim.hardware, sim.cpu_threads, {});
  sim.accelerator_costs = rooflines.accelerator;
  sim.host_costs = rooflines.host;
  sim::OffloadIterationPricer pricer(
      std::make_unique<sim::CostSourceIterationPricer>(sim.accelerator_costs, spec, 0.0), sim,
      config.max_running_sequences, kv_tokens);
  double start_s = 0;
  int64_t passes = 0;
  for (const scheduler::IterationPlan& plan : replay.plans) {
    if (plan.batch.empty()) continue;  // no pass: the engine ran no forward
    start_s += pricer.SecondsOn(0, start_s, plan);
    ++passes;
  }
  EXPECT_EQ(passes, result.executor.passes);
  result.simulator = pricer.ReplicaResult(0);
  EXPECT_EQ(result.simulator.expert_slots, result.executor.expert_slots);
  EXPECT_EQ(result.simulator.staging_buffers, result.executor.staging_buffers);
  return result;
}

TEST(ServingOffload, TheSimulatorTakesTheServedRunsDecisions) {
  struct Case {
    std::string policy;
    int64_t slots;
    policies::PolicyOptions options;
  };
  policies::PolicyOptions prefetching;
  prefetching.cache_per_layer = 3;
  prefetching.prefetch = 2;
  prefetching.staging_buffers = 2;
  for (const Case& c :
       {Case{"on-demand", 6, {}}, Case{"lru-prefetch", 10, prefetching}, Case{"fmoe", 8, {}}}) {
    const ServedDecisions both = ServeBoth(c.policy, c.options, c.slots, true);
    ASSERT_FALSE(both.executor.decisions.empty()) << c.policy;
    EXPECT_GT(both.executor.demand_fetches, 0) << c.policy;
    ASSERT_EQ(both.executor.decisions.size(), both.simulator.decisions.size()) << c.policy;
    for (size_t i = 0; i < both.executor.decisions.size(); ++i) {
      ASSERT_EQ(policies::ToString(both.executor.decisions[i]),
                policies::ToString(both.simulator.decisions[i]))
          << c.policy << ": first difference at decision " << i;
    }
    EXPECT_EQ(both.executor.hits + both.executor.inflight_hits,
              both.simulator.hits + both.simulator.inflight_hits)
        << c.policy;
    EXPECT_EQ(both.executor.prefetches, both.simulator.prefetches) << c.policy;
  }
}

// The check can fail: lru-prefetch with the simulator's own speculative-gate stand-in instead of
// the executor's replayed signals prefetches other experts.
TEST(ServingOffload, DecisionsDifferWithoutTheExecutorsGateSignals) {
  policies::PolicyOptions prefetching;
  prefetching.cache_per_layer = 3;
  prefetching.prefetch = 2;
  prefetching.staging_buffers = 2;
  const ServedDecisions both = ServeBoth("lru-prefetch", prefetching, 10, false);
  EXPECT_GT(both.executor.prefetches, 0);
  EXPECT_NE(both.executor.decisions, both.simulator.decisions);
}

}  // namespace
}  // namespace moelab::executor
