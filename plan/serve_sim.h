#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/cost_calibration.h"
#include "fit/cost_source_options.h"
#include "model/cost_source.h"
#include "model/preset_store.h"
#include "policies/policy_options.h"
#include "report/row_set.h"
#include "routing/routing_spec.h"
#include "scheduler/scheduler_config.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"
#include "sim/serving_simulator.h"

namespace moelab::plan {

// What a serving prediction runs on: the model (with --profile, the shape the profile measured)
// and the cost source that prices its iterations, chosen as every prediction command chooses it
// (fit::CostSources: --hardware, --calibrate, --profile).
struct ServingTarget {
  model::MoeModelSpec model;
  std::shared_ptr<const model::CostSource> source;
  std::string hardware;  // preset name, or "profile:FILE"
  std::optional<fit::CostCalibration> calibration;
  // With --profile: the draft its draft_decode curves measured (fit::LatencyFit::draft_name).
  std::optional<std::string> profiled_draft;
};
ServingTarget ResolveServingTarget(const std::string& model, const fit::CostSourceOptions& cost,
                                   const model::PresetStore& store);

// The KV budget in blocks of `block_tokens` from the source's memory (model::CostSource::Memory):
// (capacity x memory_fraction - weights) / (KV bytes per token x block_tokens), per device (a
// tensor-parallel node splits both). `explanation` says how, in words. Error when the weights
// leave no room for one block (naming --kv-memory-fraction and --kv-blocks).
int64_t KvBlocksFromMemory(const ServingTarget& target, int64_t block_tokens,
                           double memory_fraction, std::string& explanation);

// The longest request (prompt + output tokens) a replica takes, as `moelab serve` takes it:
// --max-sequence-tokens when given (error above the model's max_position_embeddings, as the
// engine refuses it), else what the KV budget holds within the model's positions. A request above
// it is refused (failed, "too long"), never served past the model's context window.
int64_t ResolveMaxSequenceTokens(const scheduler::SchedulerConfig& config,
                                 const model::MoeModelSpec& model);

// Serving with offloaded experts (sim serve --offload POLICY): each replica runs the offload
// simulator on `hardware` (its memory tiers, link and storage; sim::OffloadIterationPricer).
struct ServeOffload {
  std::string policy;
  policies::PolicyOptions policy_options;
  std::string hardware;                     // preset or path (sim serve's --hardware)
  std::optional<double> accelerator_bytes;  // --accelerator-memory: overrides its memory
  // --expert-memory (moelab serve's): the expert cache and staging buffers alone; the accelerator
  // memory is then the weights outside the routed experts, the KV budget and this.
  std::optional<double> expert_memory_bytes;
};

// `moelab sim serve`.
struct ServeSimRequest {
  std::string model;
  fit::CostSourceOptions cost;
  serving::LoadSpec load;
  serving::ServiceLevelObjectives slo;
  sim::ServingSimOptions options;   // scheduler.kv_blocks 0: from the cost source's memory
  double kv_memory_fraction = 0.9;  // vLLM's gpu_memory_utilization default
  double iteration_overhead_s = 0;
  // Speculative decoding (gamma > 0): every decode verifies gamma + 1 positions after gamma draft
  // steps of `draft` (priced by the same cost source, sim::SpeculativeIterationPricer) and emits
  // what the seeded coins of scheduler::SpeculativeAcceptance{alpha, acceptance_seed} accept + 1
  // (`moelab serve --alpha A --seed S` draws the same ones).
  int64_t gamma = 0;
  double alpha = 0.8;
  uint64_t acceptance_seed = 1;
  std::string draft = "llama-3.2-1b";
  // How the target's tokens route (--routing, plan sd's): the distinct experts of an iteration's
  // tokens; uniform by default.
  routing::RoutingSpec routing = routing::ParseRoutingSpec("uniform");
  uint64_t routing_seed = 1;
  std::optional<ServeOffload> offload;

  void Validate() const;  // errors name the option
};

struct ServeSimResult {
  ServeSimRequest request;  // options.scheduler with the KV budget resolved
  ServingTarget target;
  std::optional<model::MoeModelSpec> draft;  // with gamma > 0
  std::string routing;                       // what the pricing assumed: "uniform", "trace:F", ...
  std::string kv_budget_from;                // "--kv-blocks", or how the memory gave it
  // Where the lengths came from: the distribution, or "the trace's prompt_tokens column".
  std::string prompt_tokens_from, output_tokens_from;
  std::vector<serving::RequestSpec> requests;
  sim::ServingSimResult sim;
  nlohmann::json time_breakdown_s;
  nlohmann::json offload;  // sim::OffloadIterationPricer::Summary, or null

  // ServingSummaryToJson (moelab.serving/1) plus "load", "slo", "scheduler", "kv_budget",
  // "cost_source", "model", "hardware", "replicas", "router", "requests_per_replica",
  // "iterations", "mean_batch_sequences", "mean_batched_tokens", "preemptions", "refused",
  // "time_breakdown_s" (with SD "draft_s"; with offloading "offload_s"), "routing",
  // "speculative" ({gamma, alpha, acceptance_seed, draft} or null), "offload" (the policy, its
  // options, hit rate, fetches, bytes and memory plan, or null), "source": "moelab sim serve".
  nlohmann::json ToJson() const;
  std::string Text() const;
  std::string Csv() const;  // serving::ServingSummaryCsv's row
  // The Perfetto timeline: per replica, each iteration as a slice named by its composition, and
  // counters for the queue, the running sequences and the KV blocks in use.
  std::string TraceJson() const;
  // moelab.serving_decisions/1 (one replica: the engine's log has one scheduler).
  nlohmann::json DecisionsJson() const;
};

ServeSimResult RunServeSim(const ServeSimRequest& request, const model::PresetStore& store);

// The iteration pricer sim serve uses for `request` on `target`: the composition of
// serving_iteration_cost.h, the SD pricer with gamma > 0, either under sim::OffloadIterationPricer
// with request.offload (its `kv_blocks` the scheduler's budget). `draft`: the draft model with
// gamma > 0. Fresh state: an offloading pricer's caches start as the policy places them.
std::unique_ptr<sim::IterationPricer> MakeServingPricer(
    const ServeSimRequest& request, const ServingTarget& target,
    const std::optional<model::MoeModelSpec>& draft,
    const std::shared_ptr<const model::ExpertActivation>& routing, const model::PresetStore& store);
// The KV budget with offloading and no --kv-blocks: the running limit's worth of the requests'
// mean prompt + output tokens (the memory plan gives what is left to the expert cache).
int64_t OffloadKvBlocks(const scheduler::SchedulerConfig& config,
                        const std::vector<serving::RequestSpec>& requests,
                        std::string& explanation);

std::string Render(const ServeSimResult& result, report::Format format);

}  // namespace moelab::plan
