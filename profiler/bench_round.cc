#include "profiler/bench_round.h"

#include <benchmark/benchmark.h>

namespace moelab::profiler {

std::string WarmUpName(const std::string& name) { return "warm-up " + name; }

void RunBenchRound(OperatorBench& bench, const RoundPoints& round, double min_time_s,
                   CollectingReporter& collector) {
  benchmark::ClearRegisteredBenchmarks();
  const auto add = [&](const std::string& name, size_t i) {
    const GridPoint point = round.points[i];
    benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
        name.c_str(), [&bench, point](benchmark::State& state) { bench.Run(state, point); });
    b->Repetitions(1)->Unit(benchmark::kMillisecond);
    if (round.iterations[i] > 0) {
      b->Iterations(round.iterations[i]);
    } else {
      b->MinTime(min_time_s);
    }
    if (bench.manual_time()) {
      b->UseManualTime();
    } else {
      b->UseRealTime();
    }
  };
  if (!round.points.empty()) add(WarmUpName(round.names[0]), 0);
  for (size_t i = 0; i < round.points.size(); ++i) add(round.names[i], i);
  benchmark::RunSpecifiedBenchmarks(&collector, ".");
  benchmark::ClearRegisteredBenchmarks();
}

}  // namespace moelab::profiler
