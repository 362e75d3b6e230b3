// A round of a family's points: the first point's warm-up run is never one of its samples.
#include "profiler/bench_round.h"

#include <gtest/gtest.h>

namespace moelab::profiler {
namespace {

// Passes over its weights: the first `slow_passes` passes it ever runs take 3 ms, every later one
// 1 ms (manual time), as a freshly built bench's first pass over its weights did on a VM.
class FirstPassSlowBench : public OperatorBench {
 public:
  explicit FirstPassSlowBench(int slow_passes) : slow_passes_(slow_passes) {}
  bool manual_time() const override { return true; }
  void Run(benchmark::State& state, const GridPoint& /*point*/) override {
    for (auto _ : state) state.SetIterationTime(passes_++ < slow_passes_ ? 3e-3 : 1e-3);
  }
  int passes() const { return passes_; }

 private:
  int slow_passes_;
  int passes_ = 0;
};

RoundPoints TwoPoints(int64_t iterations) {
  RoundPoints round;
  for (int64_t tokens : {1, 2}) {
    GridPoint point;
    point.family = OperatorFamily::kExpertFfn;
    point.device = "cpu";
    point.tokens = tokens;
    round.points.push_back(point);
    round.names.push_back("p000" + std::to_string(tokens) + " " + point.Label());
    round.iterations.push_back(iterations);
  }
  return round;
}

TEST(BenchRound, TheFirstPointsFirstPassIsAWarmUpNotASample) {
  FirstPassSlowBench bench(/*slow_passes=*/4);
  const RoundPoints round = TwoPoints(/*iterations=*/4);
  CollectingReporter collector;
  RunBenchRound(bench, round, /*min_time_s=*/0.01, collector);
  EXPECT_EQ(bench.passes(), 12);  // the warm-up's 4, then 4 per point
  const Timing warm_up = collector.Get(WarmUpName(round.names[0]));
  ASSERT_FALSE(warm_up.failed) << warm_up.error;
  EXPECT_NEAR(warm_up.median_s, 3e-3, 1e-12);
  for (const std::string& name : round.names) {
    const Timing t = collector.Get(name);
    ASSERT_FALSE(t.failed) << name << ": " << t.error;
    EXPECT_EQ(t.repetitions, 1) << name;
    EXPECT_NEAR(t.median_s, 1e-3, 1e-12) << name;
  }
  EXPECT_NE(WarmUpName(round.names[0]), round.names[0]);
}

TEST(BenchRound, EveryRoundWarmsUpAgain) {
  // The profiler builds a family's bench again for every round: each one's first pass is slow.
  const RoundPoints round = TwoPoints(/*iterations=*/2);
  CollectingReporter collector;
  for (int r = 0; r < 3; ++r) {
    FirstPassSlowBench bench(/*slow_passes=*/2);
    RunBenchRound(bench, round, /*min_time_s=*/0.01, collector);
  }
  const Timing first = collector.Get(round.names[0]);
  ASSERT_FALSE(first.failed) << first.error;
  ASSERT_EQ(first.repetition_s.size(), 3u);
  for (double s : first.repetition_s) EXPECT_NEAR(s, 1e-3, 1e-12);
}

}  // namespace
}  // namespace moelab::profiler
