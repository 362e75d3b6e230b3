// Offload-simulator speed: simulated expert events per second on one core (issue 5's bar: at
// least 5 million). An expert event is one expert computation, one expert weight copy or one
// storage read carried through the discrete-event engine (SimResult::expert_events); each costs a
// few queue operations, its share of a policy decision and of the routing. The routing
// calibration (a one-off sample before a run) is done once outside the timed loop.
//   SimOffload/policy:P/batch:B/routing:R  Mixtral-8x7B on an RTX 3090 host, a 32-token prompt
//     then 1000 decode steps of B sequences, correlated routing (locality 0.3, layer 0.5) either
//     replayed from a recorded trace (R = 0: the engine alone, as when replaying the executor's
//     traces) or generated on the fly (R = 1: the synthetic generator included)
//   EventQueuePushPop                      push + pop of one event in a queue of 1024
// Results and the command: results/sim-bench.md.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "routing/routing_source.h"
#include "routing/routing_trace.h"
#include "policies/calibration.h"
#include "sim/event_queue.h"
#include "sim/offload_simulator.h"

namespace moelab::bench {
namespace {

const char* const kPolicies[] = {"resident",     "on-demand", "static-split",
                                 "lru-prefetch", "fiddler",   "fmoe"};

void SimOffload(benchmark::State& state) {
  const model::PresetStore store = model::PresetStore::Default();
  sim::SimConfig config;
  config.model = store.LoadModel("mixtral-8x7b");
  config.hardware = store.LoadHardware("rtx-3090");
  config.policy = kPolicies[state.range(0)];
  config.workload.kind = sim::WorkloadKind::kBatch;
  config.workload.batch = state.range(1);
  config.workload.prompt_tokens = 32;
  config.workload.output_tokens = 1001;
  config.routing = routing::ParseRoutingSpec("correlated:locality=0.3,layer=0.5");
  config.seed = 1;
  const policies::RoutingCalibration calibration =
      policies::CalibrateRouting(config.routing, 32, 8, 2, config.seed, config.calibration);
  std::unique_ptr<routing::RoutingSource> generator =
      routing::MakeRoutingSource(config.routing, 32, 8, 2, config.seed);
  std::unique_ptr<routing::RoutingSource> replay;
  if (state.range(2) == 0) {
    routing::RoutingTrace trace;
    trace.num_layers = 32;
    trace.num_experts = 8;
    trace.top_k = 2;
    trace.source = generator->Describe();
    for (const sim::Iteration& pass : sim::BuildIterations(config.workload)) {
      routing::RoutingStep& step = trace.steps.emplace_back();
      step.kind = pass.kind;
      step.tokens = pass.tokens();
      step.experts.resize(32);
      for (int64_t layer = 0; layer < 32; ++layer) {
        generator->Route(static_cast<int64_t>(trace.steps.size()) - 1, layer, step.tokens,
                         step.experts[layer]);
      }
    }
    replay = routing::MakeTraceRouting(std::move(trace), 32, 8, 2, "recorded trace");
  }
  routing::RoutingSource& routing = replay ? *replay : *generator;
  const fit::OffloadSources rooflines =
      fit::AnalyticOffloadSources(config.model, config.hardware, config.cpu_threads, {});
  config.accelerator_costs = rooflines.accelerator;
  config.host_costs = rooflines.host;
  int64_t expert_events = 0, events = 0;
  for (auto _ : state) {
    const sim::SimResult result = sim::SimulateOffload(config, routing, calibration);
    expert_events += result.expert_events;
    events += static_cast<int64_t>(result.events);
    benchmark::DoNotOptimize(result.total_s);
  }
  state.SetLabel(std::string(kPolicies[state.range(0)]) + ", batch " +
                 std::to_string(state.range(1)) +
                 (replay ? ", trace replay" : ", generated routing"));
  state.counters["expert_events_per_s"] =
      benchmark::Counter(static_cast<double>(expert_events), benchmark::Counter::kIsRate);
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}

void EventQueuePushPop(benchmark::State& state) {
  sim::EventQueue queue;
  std::mt19937_64 random(1);
  for (int i = 0; i < 1024; ++i) queue.Push(static_cast<double>(random() % 1000) * 1e-6, i);
  for (auto _ : state) {
    const sim::EventQueue::Event event = queue.Pop();
    queue.Push(event.time_s + static_cast<double>(random() % 1000) * 1e-6, event.id);
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(SimOffload)
    ->ArgsProduct({{0, 1, 2, 3, 4, 5}, {1, 16}, {0, 1}})
    ->ArgNames({"policy", "batch", "routing"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(EventQueuePushPop);

}  // namespace
}  // namespace moelab::bench

// main: bench_main.cc (stamps provenance).
