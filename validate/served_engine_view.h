#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/serving_engine.h"
#include "serving/serving_metrics.h"
#include "sim/serving_simulator.h"

namespace moelab::validate {

// What the engine's own record of a served run (executor::EngineRecording) says, so that a
// serving miss can be split into its parts: the engine-side latencies (the client's less what
// HTTP, the stream and the load generator add), and each served iteration's wall time against
// the composed price of its plan (what the composition misses at the batches serving really runs,
// split by kind: decode-only iterations and those carrying a prefill chunk), and the engine's own
// time between iterations while work remained.
struct ServedEngineView {
  struct Iteration {  // one served iteration that ran a batch
    double start_s = 0, wall_s = 0, composed_s = 0;
    // Its end to the next iteration's start when the engine still had work (the loop, the
    // scheduler's plan and the token hand-off), else 0: engine time the operators leave out.
    double handoff_s = 0;
    // How long the engine had nothing to run before it (the previous iteration left no work):
    // the wake it pays (engine_wake.h). 0 when work carried over, -1 for the record's first
    // iteration (the idle time before it is not in the record).
    double idle_before_s = 0;
    int64_t decodes = 0, prefill_chunks = 0, prefill_tokens = 0;
    // Of the prefill chunks, those continuing a prompt (context > 0: priced as multi-query
    // attention over a cache, not as a fresh prompt's) and their tokens.
    int64_t prefill_continuing_chunks = 0, prefill_continuing_tokens = 0;
    double decode_context_mean = 0;
  };
  std::vector<Iteration> rows;
  serving::ServingSummary engine_side;  // from the engine's emit times (engine clock)
  int64_t iterations = 0, decode_only_iterations = 0;
  // Engine seconds per composed second, per kind: the iterations' summed wall time and hand-offs
  // over their summed composed price; 0 when the run had no iteration of that kind. A sum, not a
  // median of per-iteration ratios: a token's latency is the sum of the iterations it waits
  // through, and the ratios are skewed right (iterations the server's HTTP threads and the load
  // generator preempt on a 2-core machine run 1.5-2x their price): the served runs' summed wall
  // time over summed price exceeded the median by 7-25 % (results/validate-serving-avx512bf16-
  // 2026-12-06).
  double decode_only_scale = 0, with_prefill_scale = 0;
  // The medians of the per-iteration ratios (the earlier estimator), reported beside them.
  double decode_only_median_scale = 0, with_prefill_median_scale = 0;
  // The iterations with a prefill chunk split by whether they carried decodes too: a lone prefill
  // (the engine woken by new prompts alone) took 1.31 and 1.56 of its price over the served runs
  // of two records, prefill chunks beside decodes 1.08 and 1.19 (summed wall time over summed
  // price). Summed as above; 0: none.
  int64_t lone_prefill_iterations = 0;
  double lone_prefill_scale = 0, mixed_prefill_scale = 0;
  // Median time from one iteration's end to the next one's start when the engine still had
  // work (the loop, the scheduler's plan and the token hand-off the operators leave out).
  double between_iterations_s = 0;
  double busy_s = 0;  // summed iteration wall time
  // Decode-only iterations by their batch (sequences decoded): up to 8, 16, 32, 64, more. The
  // composition's miss grows with the batch (decodes of 33-64 sequences at 1.09-1.27 of their
  // price where those of at most 16 ran at 0.94-1.02 on a 2-vCPU VM), so one ratio of a run's
  // small batches does not price its large ones.
  static constexpr std::array<int64_t, 5> kDecodeBatchUpTo = {8, 16, 32, 64, INT64_MAX};
  static size_t DecodeBatchBucket(int64_t decodes);
  // Iterations with a prefill chunk by their prefill tokens: up to 256, more. A few large chunks
  // (the calibration burst's prompts, 1,000-1,900 tokens, at 0.90-1.15 of their price) held most
  // of the calibration's composed prefill time, where the small chunks beside decodes that the
  // judged runs below saturation carry (60-140 tokens) ran at 1.16-1.44: one ratio priced those
  // runs' prefill iterations 8-10 % fast in four of five records of 2026-12-06.
  static constexpr std::array<int64_t, 2> kPrefillTokensUpTo = {256, INT64_MAX};
  static size_t PrefillTokensBucket(int64_t prefill_tokens);
  std::array<double, 2> prefill_scale_by_tokens{};  // summed, lone and beside decodes; 0: none
  std::array<int64_t, 2> prefill_iterations_by_tokens{};
  std::array<double, 2> prefill_engine_s_by_tokens{};    // their summed wall time and hand-offs
  std::array<double, 5> decode_scale_by_batch{};         // summed as decode_only_scale; 0: none
  std::array<double, 5> decode_median_scale_by_batch{};  // the median ratio; 0: none
  std::array<int64_t, 5> decode_iterations_by_batch{};
  std::array<double, 5> decode_engine_s_by_batch{};  // their summed wall time and hand-offs

  nlohmann::json ToJson() const;
};

// served-iterations.csv's header and one row per iteration, each row led by `key` (the run's
// rate and round).
std::string ServedIterationsCsvHeader();
std::string ServedIterationsCsvRows(const ServedEngineView& view, const std::string& key);

ServedEngineView ViewServedEngine(const executor::EngineRecording& recording,
                                  sim::IterationPricer& composed);

}  // namespace moelab::validate
