// The serving simulator's speed (issue 38: at least 10,000 simulated requests per wall-second on
// one core for the default model): Qwen2-57B-A14B on 2 x A100-80GB SXM (plan sd's default), the
// analytic roofline, the KV budget from its memory, Poisson arrivals at `rate` requests/s with
// prompts of 512 and outputs of 128 tokens, 10,000 requests per run; plain, with speculative
// decoding and with correlated routing. The pricer (and its memo of Forward costs) is built inside
// the timed region: a run pays for every shape it prices.
#include <benchmark/benchmark.h>

#include <memory>
#include <utility>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "plan/serve_sim.h"
#include "plan/sd_sweep.h"
#include "routing/routing_spec.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_speculative_cost.h"

namespace moelab::bench {
namespace {

// What a case adds to plain sim serve: nothing, speculative decoding (gamma 3 at alpha 0.8, the
// llama-3.2-1b draft), or correlated routing (the sampled distinct experts).
enum class Variant { kPlain, kSpeculative, kRouting };

void RunServeSim10k(benchmark::State& state, Variant variant) {
  const model::PresetStore store = model::PresetStore::Default();
  fit::CostSourceOptions cost;
  cost.hardware = "2xa100-80gb-sxm";
  const plan::ServingTarget target = plan::ResolveServingTarget("qwen2-57b-a14b", cost, store);
  sim::ServingSimOptions options;
  std::string explanation;
  options.scheduler.kv_blocks =
      plan::KvBlocksFromMemory(target, options.scheduler.kv_block_tokens, 0.9, explanation);
  const model::MoeModelSpec draft = store.LoadModel("llama-3.2-1b");
  std::shared_ptr<const model::ExpertActivation> routing;
  if (variant == Variant::kSpeculative) {
    options.scheduler.decode_tokens_per_step = 4;
    options.scheduler.max_batched_tokens = 4096;  // 64 running x 4 positions must fit
    options.acceptance = scheduler::SpeculativeAcceptance{0.8, 1};
  } else if (variant == Variant::kRouting) {
    routing = plan::TargetRouting(routing::ParseRoutingSpec("correlated"), target.model, 1);
  }
  serving::LoadSpec load;
  load.arrivals.kind = serving::ArrivalProcess::Kind::kPoisson;
  load.arrivals.rate_per_s = static_cast<double>(state.range(0));
  load.prompt_tokens.fixed = 512;
  load.output_tokens.fixed = 128;
  load.requests = 10000;
  load.seed = 1;
  const std::vector<serving::RequestSpec> requests = serving::GenerateRequests(load);
  int64_t simulated = 0, iterations = 0;
  for (auto _ : state) {
    auto pricer = std::make_unique<sim::CostSourceIterationPricer>(target.source, target.model, 0);
    pricer->RouteBy(routing.get());
    std::unique_ptr<sim::IterationPricer> speculative;
    if (variant == Variant::kSpeculative) {
      speculative = std::make_unique<sim::SpeculativeIterationPricer>(
          std::move(pricer),
          std::make_unique<sim::CostSourceIterationPricer>(target.source, draft, 0));
    }
    const sim::ServingSimResult result = sim::SimulateServing(
        requests, options,
        speculative ? *speculative : static_cast<sim::IterationPricer&>(*pricer));
    simulated += static_cast<int64_t>(result.outcomes.size());
    iterations += result.iterations;
    benchmark::DoNotOptimize(result.summary.ttft_s.p99);
  }
  state.counters["requests_per_s"] =
      benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kIsRate);
  state.counters["iterations_per_run"] =
      static_cast<double>(iterations) / static_cast<double>(state.iterations());
}

void ServeSim10k(benchmark::State& state) { RunServeSim10k(state, Variant::kPlain); }
void ServeSim10kSpeculative(benchmark::State& state) {
  RunServeSim10k(state, Variant::kSpeculative);
}
void ServeSim10kCorrelatedRouting(benchmark::State& state) {
  RunServeSim10k(state, Variant::kRouting);
}

// 4 requests/s: a light load (small batches); 16: near this setup's saturation (large batches).
BENCHMARK(ServeSim10k)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ServeSim10kSpeculative)->Arg(4)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(ServeSim10kCorrelatedRouting)
    ->Arg(4)
    ->Arg(16)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace moelab::bench

// main: bench_main.cc (stamps provenance).
