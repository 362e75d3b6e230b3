// The SD sweep's speed: 100 batches x 50 gammas x 20 acceptance rates = 100,000 points from the
// analytic cost model (Qwen2-57B-A14B + Qwen2-0.5B on 2 x A100-80GB), cost cache built inside the
// timed region. Target: under one second (issue 5).
#include <benchmark/benchmark.h>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "model/sd_plan.h"

namespace moelab::bench {
namespace {

void SdSweep100k(benchmark::State& state) {
  const model::PresetStore store = model::PresetStore::Default();
  const model::MoeModelSpec target = store.LoadModel("qwen2-57b-a14b");
  const model::MoeModelSpec draft = store.LoadModel("qwen2-0.5b");
  const model::HardwareSpec hardware = store.LoadHardware("2xa100-80gb-sxm");
  model::SdPlanOptions options;
  options.batches.clear();
  options.gammas.clear();
  for (int64_t b = 1; b <= 100; ++b) options.batches.push_back(b);
  for (int64_t g = 1; g <= 50; ++g) options.gammas.push_back(g);
  int64_t points = 0;
  for (auto _ : state) {
    const model::CostParameters params;
    const auto source =
        fit::CostSources::Roofline(model::ComputeTargetOf(hardware, params.compute_dtype), params);
    model::SdStepCosts costs(*source, target, draft, 1024);
    for (int a = 1; a <= 20; ++a) {
      options.alpha = 0.0475 * a;
      const model::SdPlan plan = model::PlanSpeculativeDecoding(costs, options);
      points += static_cast<int64_t>(plan.rows.size());
      benchmark::DoNotOptimize(plan.rows.data());
    }
  }
  state.counters["points_per_s"] =
      benchmark::Counter(static_cast<double>(points), benchmark::Counter::kIsRate);
  state.counters["points_per_sweep"] =
      static_cast<double>(points) / static_cast<double>(state.iterations());
}

BENCHMARK(SdSweep100k)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace moelab::bench

// main: bench_main.cc (stamps provenance).
