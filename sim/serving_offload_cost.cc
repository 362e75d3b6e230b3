#include "sim/serving_offload_cost.h"

#include <cmath>
#include <utility>

#include "base/error.h"
#include "base/hash.h"
#include "sim/engine.h"

namespace moelab::sim {

struct OffloadIterationPricer::Replica {
  SimResult result;
  std::unique_ptr<routing::RoutingSource> routing;
  std::unique_ptr<Engine> engine;
  bool ran = false;
  double free_at_s = 0;  // when its last iteration ended, in serving time
};

OffloadIterationPricer::OffloadIterationPricer(std::unique_ptr<IterationPricer> compute,
                                               SimConfig config, int64_t max_sequences,
                                               int64_t kv_tokens)
    : compute_(std::move(compute)), config_(std::move(config)) {
  if (config_.routing.kind == routing::RoutingSpec::Kind::kTrace) {
    throw base::Error(
        "--routing trace: with --offload each iteration's tokens are routed by a generated "
        "source (a trace's steps have their own token counts); use uniform, popularity:FILE or "
        "correlated:...");
  }
  if (config_.routing.kind == routing::RoutingSpec::Kind::kGate) {
    throw base::Error("--routing gate: the simulator has no model gate");
  }
  config_.workload = Workload{};
  config_.workload.kind = WorkloadKind::kBatch;
  config_.workload.batch = max_sequences;
  config_.workload.prompt_tokens = 1;
  config_.workload.output_tokens = 1;
  config_.serving_kv_tokens = kv_tokens;
  config_.Validate();
  const model::MoeModelSpec& model = config_.model;
  calibration_ =
      policies::CalibrateRouting(config_.routing, model.num_moe_layers(), model.moe->num_experts,
                                 model.moe->top_k, config_.seed, config_.calibration);
  ReplicaAt(0);  // the memory plan's errors before the first iteration
}

OffloadIterationPricer::~OffloadIterationPricer() = default;

OffloadIterationPricer::Replica& OffloadIterationPricer::ReplicaAt(int64_t replica) {
  while (static_cast<int64_t>(replicas_.size()) <= replica) {
    auto added = std::make_unique<Replica>();
    const model::MoeModelSpec& model = config_.model;
    // Each replica routes its own tokens: a seed of its own.
    const uint64_t seed =
        replicas_.empty() ? config_.seed : base::SplitMix64(config_.seed ^ replicas_.size());
    added->routing = routing::MakeRoutingSource(config_.routing, model.num_moe_layers(),
                                                model.moe->num_experts, model.moe->top_k, seed);
    added->result.model = model.name;
    added->result.hardware = config_.hardware.name;
    added->result.policy = config_.policy;
    added->result.routing = added->routing->Describe();
    added->engine = std::make_unique<Engine>(config_, *added->routing, calibration_, added->result);
    replicas_.push_back(std::move(added));
  }
  return *replicas_[static_cast<size_t>(replica)];
}

double OffloadIterationPricer::Seconds(const scheduler::IterationPlan& plan) {
  return SecondsOn(0, ReplicaAt(0).free_at_s, plan);
}

double OffloadIterationPricer::SecondsOn(int64_t replica_index, double start_s,
                                         const scheduler::IterationPlan& plan) {
  Replica& replica = ReplicaAt(replica_index);
  Iteration pass;
  pass.kind = "serve";
  pass.batch = plan.batched_tokens();
  pass.tokens_per_sequence = 1;
  pass.logits_for_all_positions = false;
  int64_t context = 0;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    pass.requests.push_back(static_cast<int64_t>(i));
    context += plan.batch[i].context_tokens;
  }
  if (!plan.batch.empty()) {
    pass.context_length = static_cast<int64_t>(
        std::llround(static_cast<double>(context) / static_cast<double>(plan.batch.size())));
  }
  const double idle_s = replica.ran ? std::max(0.0, start_s - replica.free_at_s) : 0.0;
  const Engine::ServingPass ran = replica.engine->RunServingPass(pass, idle_s);
  const double compute_s = compute_->SecondsOn(replica_index, start_s, plan);
  const double offload_s = ran.duration_s - ran.resident_s;
  const double seconds = compute_s + offload_s;
  replica.ran = true;
  replica.free_at_s = start_s + seconds;
  ++iterations_;
  offload_s_ += offload_s;
  resident_s_ += ran.resident_s;
  return seconds;
}

const SimResult& OffloadIterationPricer::ReplicaResult(int64_t replica) {
  if (replica < 0 || replica >= static_cast<int64_t>(replicas_.size())) {
    throw base::Error("serving offload: replica " + std::to_string(replica) + " never ran");
  }
  Replica& r = *replicas_[static_cast<size_t>(replica)];
  r.engine->FinishServing();
  return r.result;
}

nlohmann::json OffloadIterationPricer::Summary() {
  SimResult total;
  for (const auto& replica : replicas_) {
    replica->engine->FinishServing();
    const SimResult& r = replica->result;
    total.expert_activations += r.expert_activations;
    total.hits += r.hits;
    total.inflight_hits += r.inflight_hits;
    total.demand_fetches += r.demand_fetches;
    total.transient_fetches += r.transient_fetches;
    total.cpu_runs += r.cpu_runs;
    total.prefetches += r.prefetches;
    total.prefetches_used += r.prefetches_used;
    total.prefetches_wasted += r.prefetches_wasted;
    total.routed_tokens += r.routed_tokens;
    total.hit_tokens += r.hit_tokens;
    total.bytes_h2d_expert_weights += r.bytes_h2d_expert_weights;
    total.bytes_storage_read += r.bytes_storage_read;
  }
  const SimResult& first = replicas_.front()->result;
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, value] : first.policy_options) options[name] = value;
  return {{"policy", config_.policy},
          {"policy_options", options},
          {"routing", first.routing},
          {"replicas", static_cast<int64_t>(replicas_.size())},
          {"iterations", iterations_},
          {"offload_s", offload_s_},
          {"resident_s", resident_s_},
          {"hit_rate", total.hit_rate()},
          {"token_hit_rate", total.token_hit_rate()},
          {"experts",
           {{"activations", total.expert_activations},
            {"hits", total.hits},
            {"inflight_hits", total.inflight_hits},
            {"demand_fetches", total.demand_fetches},
            {"transient_fetches", total.transient_fetches},
            {"cpu_runs", total.cpu_runs},
            {"prefetches", total.prefetches},
            {"prefetches_used", total.prefetches_used},
            {"prefetches_wasted", total.prefetches_wasted}}},
          {"bytes",
           {{"host_to_accelerator_expert_weights", total.bytes_h2d_expert_weights},
            {"storage_to_host", total.bytes_storage_read}}},
          {"memory",
           {{"accelerator_bytes", first.accelerator_bytes},
            {"fixed_bytes", first.fixed_bytes},
            {"kv_bytes", first.kv_bytes},
            {"expert_slots", first.expert_slots},
            {"staging_buffers", first.staging_buffers},
            {"experts_total", first.experts_total},
            {"experts_on_storage", first.experts_on_storage},
            {"fits_accelerator", first.fits_accelerator}}}};
}

}  // namespace moelab::sim
