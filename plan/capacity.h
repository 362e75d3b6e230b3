#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "report/row_set.h"
#include "scheduler/scheduler_config.h"
#include "serving/load_spec.h"
#include "sim/serving_simulator.h"

namespace moelab::plan {

// `moelab plan capacity`: for each hardware, the fewest replicas and the scheduler settings whose
// simulated serving (sim serve: Poisson arrivals at `rate_per_s`, the seeded lengths) meets both
// p99 objectives with no request refused; rows cheapest first. Replicas are searched upward by
// doubling, then bisected between the last failing and the first meeting count (assumes more
// replicas never hurt, which holds for round-robin over identical replicas up to the draw's noise).
struct CapacityRequest {
  std::string model;
  std::vector<std::string> hardware;
  fit::CostSourceOptions cost;  // `hardware` is set per candidate
  double rate_per_s = 0;
  double slo_ttft_p99_s = 0, slo_tpot_p99_s = 0;
  std::vector<int64_t> max_batch{64};  // --max-batch: max running sequences
  std::vector<int64_t> chunk{0};       // --chunk: prefill chunk tokens (0: no cap)
  // --gamma: speculative decoding's draft tokens per decode (0: none), each priced as sim serve
  // --gamma prices it (draft `draft`, seeded acceptance at `alpha`, acceptance seed = `seed`).
  std::vector<int64_t> gamma{0};
  // --policy: expert placements to try: "resident" (every expert in the accelerator's memory; the
  // KV budget from what the weights leave) or an offload policy, priced as sim serve --offload
  // prices it on the hardware preset (its memory, host and link; the KV budget of
  // plan::OffloadKvBlocks).
  std::vector<std::string> policies{"resident"};
  double alpha = 0.8;
  std::string draft = "llama-3.2-1b";
  int64_t requests = 1000;
  uint64_t seed = 1;
  serving::LengthDistribution prompt_tokens, output_tokens;
  scheduler::SchedulerConfig scheduler;  // the other settings (kv_blocks 0: from memory)
  double kv_memory_fraction = 0.9;
  sim::Router router = sim::Router::kRoundRobin;
  int64_t max_replicas = 256;
  std::map<std::string, double> price_usd_per_hour;  // --price H=USD overrides, per hardware

  void Validate() const;  // errors name the option
};

// One (hardware, settings) candidate at the fewest replicas meeting the objectives (or, when none
// up to max_replicas does, at max_replicas with meets_slo false).
struct CapacityRow {
  std::string hardware;
  std::string policy = "resident";
  int64_t max_batch = 0, chunk = 0, gamma = 0;
  int64_t replicas = 0;
  bool meets_slo = false;
  std::string why_not;  // when not: "weights do not fit", "p99 TTFT ... at 256 replicas", ...
  double ttft_p99_s = 0, tpot_p99_s = 0;
  double throughput_tokens_per_s_per_replica = 0;
  int64_t kv_blocks = 0;
  std::optional<double> cost_usd_per_hour;
  std::string price_source;
  bool pareto = false;  // on the front of throughput per replica vs p99 TTFT (meeting rows)
};

struct CapacityResult {
  CapacityRequest request;
  std::vector<CapacityRow> rows;        // best settings per hardware, cheapest first
  std::vector<CapacityRow> candidates;  // every (hardware, settings) evaluated
  std::vector<std::string> cost_sources;

  nlohmann::json ToJson() const;  // {"schema": "moelab.plan_capacity/1", "rows", "pareto", ...}
  report::RowSet Rows() const;
  report::RowSet ParetoRows() const;
  std::string Text() const;
  // A gnuplot script with its data inline (--plot-out): throughput per replica vs p99 TTFT of
  // every candidate that meets the objectives, one series per hardware, the Pareto front marked.
  std::string GnuplotScript() const;
};

CapacityResult PlanCapacity(const CapacityRequest& request, const model::PresetStore& store);

// "H=USD,H=USD" (--price) into a map; errors name --price.
std::map<std::string, double> ParsePrices(const std::string& text);

}  // namespace moelab::plan
