#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/operator_bench.h"
#include "profiler/profile_grid.h"
#include "profiler/run_collector.h"

namespace moelab::profiler {

// The points of one family on one device as one round measures them: each point's name (the key
// of its runs in the collector) and fixed iteration count (0: Google Benchmark grows the
// iterations to `min_time_s`).
struct RoundPoints {
  std::vector<GridPoint> points;
  std::vector<std::string> names;
  std::vector<int64_t> iterations;
};

// The name a round's warm-up run of `name` is collected under (never a point's name).
std::string WarmUpName(const std::string& name);

// One repetition of every point of `round` on `bench` (one Google Benchmark run each, in order),
// collected into `collector` under the points' names.
//
// The first point runs once more before the timed ones, collected under WarmUpName and never a
// sample, so no point pays what a freshly built bench pays once (threads woken from sleep, caches
// and translations cold; the weight-cycling benches also read every block once when they are
// built, ffn_bench.cc). Without both, in the six quick validation profiles of 2026-12-04/05, the
// first point of the families that stream from DRAM had a median 1.2-2.1x its fastest repetition
// (expert_ffn at 1 token), 1.1-2.7x (lm_head) and 1.7-4.9x (attention_decode), against about
// 1.1x for the other points, which pulled the fitted small-token costs, so decode, up.
void RunBenchRound(OperatorBench& bench, const RoundPoints& round, double min_time_s,
                   CollectingReporter& collector);

}  // namespace moelab::profiler
