#include "executor/offload/offload_runtime.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "base/error.h"
#include "base/limits.h"
#include "base/message_text.h"
#include "executor/offload/storage_tier.h"
#include "policies/calibration.h"
#include "policies/registry.h"
#include "report/format.h"
#include "policies/semantic_embedding.h"
#include "report/format.h"

namespace moelab::executor::offload {
namespace {

using Clock = std::chrono::steady_clock;
using policies::ExpertAction;
using policies::ExpertDecision;
using policies::ExpertRef;
using policies::FetchTarget;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What the policy is built on: the model's layers and experts, and the expert memory as the
// accelerator's (the dense parts and embeddings stay in RAM outside the budget).
policies::OffloadSetup PolicySetup(const ExecutorConfig& config, const OffloadOptions& options,
                                   int64_t expert_bytes) {
  policies::OffloadSetup setup;
  setup.num_layers = config.num_layers;
  setup.first_dense_layers = config.first_dense_layers;
  setup.num_moe_layers = config.num_layers - config.first_dense_layers;
  setup.num_experts = config.num_experts;
  setup.top_k = config.top_k;
  setup.expert_bytes = expert_bytes;
  setup.accelerator_bytes = static_cast<double>(options.expert_memory_bytes);
  setup.dense_layer_bytes.assign(static_cast<size_t>(config.num_layers), 0.0);
  setup.popularity = options.popularity;
  setup.history = options.history;
  setup.seed = options.seed;
  if (options.fiddler_latency) setup.latency = *options.fiddler_latency;
  return setup;
}

// The policy, its errors in this runtime's words: here the fast tier is the expert memory.
std::unique_ptr<policies::OffloadPolicy> MakePolicy(const OffloadOptions& options,
                                                    const policies::OffloadSetup& setup) {
  try {
    return policies::MakeOffloadPolicy(options.policy, options.policy_options, setup);
  } catch (const base::Error& e) {
    // The policies speak of the simulator's accelerator (and its --policy); here the fast tier is
    // the RAM budget, and the policy is --offload's.
    throw base::Error(
        base::Reworded(e.what(), {{"--accelerator-memory", "--expert-memory"},
                                  {"accelerator memory", "expert memory (--expert-memory)"},
                                  {"--policy:", "--offload:"}}));
  }
}

}  // namespace

void OffloadOptions::Validate() const {
  if (policy.empty()) throw base::Error("--offload: name an offload policy");
  if (expert_memory_bytes < 1)
    throw base::Error("--expert-memory must be at least 1 byte, got " +
                      std::to_string(expert_memory_bytes));
  // Before any reader starts: each is a thread with a buffer of one expert (or an io_uring entry
  // with one), so 1,000,000,000 readers took all memory, and thousands ended in std::terminate.
  base::CheckCount(reader_threads, 1, base::kMaxReadsInFlight, "--offload-readers",
                   "reads in flight, each a thread or io_uring entry with a buffer of one expert; "
                   "a few dozen saturate an NVMe drive");
  if (semantic_dim < 1) throw base::Error("offload: semantic_dim must be at least 1");
}

void OffloadOptions::CalibrateOn(const std::string& spec, int64_t num_layers, int64_t num_experts,
                                 int64_t top_k, uint64_t seed) {
  policies::CalibrationOptions options;
  options.option = "--offload-calibration";  // its messages name the run's option
  policies::RoutingCalibration calibration =
      policies::CalibrateRouting(spec, num_layers, num_experts, top_k, seed, options);
  popularity = std::move(calibration.popularity);
  history = std::move(calibration.history);
}

nlohmann::json OffloadStats::ToJson() const {
  nlohmann::json options = nlohmann::json::object();
  for (const auto& [name, value] : policy_options) options[name] = value;
  nlohmann::json json = {
      {"policy", policy},
      {"policy_options", options},
      {"hit_rate", hit_rate()},
      {"activations", activations},
      {"hits", hits},
      {"inflight_hits", inflight_hits},
      {"demand_fetches", demand_fetches},
      {"transient_fetches", transient_fetches},
      {"storage_runs", storage_runs},
      {"reads", reads},
      {"bytes_read_storage", bytes_read_storage},
      {"initial_reads", initial_reads},
      {"prefetches", prefetches},
      {"prefetches_used", prefetches_used},
      {"prefetches_wasted", prefetches_wasted},
      {"stall_s", stall_s},
      {"per_layer_hits", layer_hits},
      {"per_layer_activations", layer_activations},
      {"expert_bytes", expert_bytes},
      {"expert_slots", expert_slots},
      {"staging_buffers", staging_buffers},
      {"buffers_allocated", buffers_allocated},
      {"speculative_recall", speculative_used > 0
                                 ? nlohmann::json(static_cast<double>(speculative_predicted) /
                                                  static_cast<double>(speculative_used))
                                 : nlohmann::json(nullptr)},
      {"store",
       {{"path", store_path},
        {"reused", store_reused},
        {"build_s", store_build_s},
        {"direct_io", direct_io}}}};
  if (!reader.empty())
    json["store"]["reader"] = {{"kind", reader}, {"reads_in_flight", reads_in_flight}};
  if (!warning.empty()) json["warning"] = warning;
  if (read_spans) {
    const auto per = [](double seconds, int64_t n) {
      return n > 0 ? nlohmann::json(seconds / static_cast<double>(n)) : nlohmann::json(nullptr);
    };
    json["read_spans"] = {{"reads", read_spans->reads},
                          {"queued_s_per_read", per(read_spans->queued_s, read_spans->reads)},
                          {"running_s_per_read", per(read_spans->running_s, read_spans->reads)},
                          {"waits", read_spans->waits},
                          {"wake_s_per_wait", per(read_spans->wake_s, read_spans->waits)}};
  }
  if (copy_busy_s) {
    json["copy_busy_s"] = *copy_busy_s;
    const std::optional<double> rate = copy_bytes_per_s();
    json["copy_bytes_per_s"] = rate ? nlohmann::json(*rate) : nlohmann::json(nullptr);
  }
  if (fiddler_latency) {
    json["fiddler_latency"] = {{"cpu_base_s", fiddler_latency->cpu_base_s},
                               {"cpu_per_token_s", fiddler_latency->cpu_per_token_s},
                               {"gpu_s", fiddler_latency->gpu_s},
                               {"transfer_s", fiddler_latency->transfer_s}};
  }
  return json;
}

std::optional<double> OffloadStats::copy_bytes_per_s() const {
  if (!copy_busy_s || !(*copy_busy_s > 0)) return std::nullopt;
  return static_cast<double>(copies_done) * copy_block_bytes / *copy_busy_s;
}

OffloadRuntime::OffloadRuntime(const ExecutorConfig& config, const ExpertStore& store,
                               const OffloadOptions& options)
    : OffloadRuntime(config,
                     std::make_unique<StorageTier>(config, store, options.reader,
                                                   options.reader_threads, options.timeline),
                     options) {
  stats_.reader = ToString(options.reader);
  stats_.reads_in_flight = options.reader_threads;
}

OffloadRuntime::OffloadRuntime(const ExecutorConfig& config, std::unique_ptr<ExpertTier> tier,
                               const OffloadOptions& options)
    : config_(config),
      tier_(std::move(tier)),
      options_(options),
      experts_(config.num_experts),
      moe_layers_(config.num_layers - config.first_dense_layers) {
  policy_ = PlanOffload(config, options, tier_->expert_bytes(), tier_->has_host_compute());
  needs_ = policy_->Needs();
  const int64_t slots = policy_->ExpertSlots(), staging = policy_->StagingBuffersUsed();
  checker_.emplace(policy_->Name(), moe_layers_, experts_, slots, staging);
  InitStats(slots, staging);
  slots_.assign(static_cast<size_t>(moe_layers_ * experts_), Slot{});
  PreallocateBuffers(slots + staging);
  LoadInitialPlacement();
  runs_on_host_.assign(static_cast<size_t>(experts_), 0);
}

std::unique_ptr<policies::OffloadPolicy> PlanOffload(const ExecutorConfig& config,
                                                     const OffloadOptions& options,
                                                     int64_t expert_bytes, bool has_host_compute) {
  options.Validate();
  if (!config.is_moe())
    throw base::Error("--offload moves routed experts; model '" + config.name + "' is dense");
  if (options.policy == "fiddler" && options.fiddler_latency && has_host_compute) {
    // Fiddler with the CPU next to a GPU: the engine measured its latency model.
  } else if (options.policy == "fiddler") {
    throw base::Error(
        "--offload fiddler: Fiddler runs experts on a second compute device (the CPU next to a "
        "GPU) while the first holds the cache; on --device cpu the executor has only the CPU, so "
        "use --device gpu, or on-demand, lru-prefetch, static-split, fmoe or stream-all");
  }
  const int64_t fit = options.expert_memory_bytes / expert_bytes;
  if (fit < config.top_k) {
    throw base::Error("--expert-memory " + std::to_string(options.expert_memory_bytes) +
                      " bytes holds " + std::to_string(fit) + " experts of " +
                      report::FormatBytes(static_cast<double>(expert_bytes)) +
                      ", fewer than one layer's top-" + std::to_string(config.top_k) + " (" +
                      std::to_string(config.top_k * expert_bytes) + " bytes at least)");
  }
  const policies::OffloadSetup setup = PolicySetup(config, options, expert_bytes);
  std::unique_ptr<policies::OffloadPolicy> policy = MakePolicy(options, setup);
  const int64_t slots = policy->ExpertSlots(), staging = policy->StagingBuffersUsed();
  if (!policy->IgnoresMemoryLimit() &&
      static_cast<double>(slots + staging) * static_cast<double>(expert_bytes) >
          setup.accelerator_bytes) {
    throw base::Error("--expert-memory: policy '" + options.policy + "' asks for " +
                      std::to_string(slots) + " cached experts and " + std::to_string(staging) +
                      " staging buffers of " +
                      report::FormatBytes(static_cast<double>(expert_bytes)) + ", more than " +
                      std::to_string(options.expert_memory_bytes) + " bytes");
  }
  return policy;
}

void OffloadRuntime::InitStats(int64_t slots, int64_t staging) {
  stats_.policy = policy_->Name();
  stats_.policy_options = policy_->ResolvedOptions();
  stats_.fiddler_latency = options_.fiddler_latency;
  stats_.store_path = tier_->slow_tier_path();
  stats_.direct_io = tier_->direct_io();
  stats_.warning = tier_->warning();
  stats_.expert_bytes = tier_->expert_bytes();
  stats_.expert_slots = slots;
  stats_.staging_buffers = staging;
  stats_.layer_hits.assign(static_cast<size_t>(moe_layers_), 0);
  stats_.layer_activations.assign(static_cast<size_t>(moe_layers_), 0);
}

void OffloadRuntime::PreallocateBuffers(int64_t cache_buffers) {
  // On a tier without host compute, a layer the policy runs on the CPU (static-split's) reads its
  // experts into transient buffers, up to one layer's experts at once. They are allocated here,
  // before the first token like the initial placement: allocating (page-faulting) them in the first
  // pass cost ~1.3 ms per 3 MB buffer on the Xeon (10 ms of a 100 ms prefill), a cost neither the
  // profile nor the simulator has.
  int64_t transient = 0;
  if (!tier_->has_host_compute()) {
    for (int64_t layer = config_.first_dense_layers; layer < config_.num_layers; ++layer) {
      if (policy_->DenseDevice(layer) == policies::Device::kCpu) transient = experts_;
    }
  }
  const int64_t preallocated = std::min(cache_buffers + transient, moe_layers_ * experts_);
  for (int64_t i = 0; i < preallocated; ++i) TakeBuffer();
  for (int32_t i = static_cast<int32_t>(preallocated) - 1; i >= 0; --i) FreeBuffer(i);
}

void OffloadRuntime::LoadInitialPlacement() {
  // The initial placement, loaded before the first token (untimed, as in the simulator).
  for (const ExpertRef& ref : policy_->InitialPlacement()) {
    checker_->PlaceInitial(ref);
    Load(ref, 0, 0, false);
    ++stats_.initial_reads;
  }
  checker_->EndInitialPlacement();
  for (const Slot& slot : slots_) {
    if (slot.job >= 0) tier_->Finish(slot.job);
  }
  if (const std::optional<ExpertTier::CopyTiming> timing = tier_->copy_timing())
    initial_spans_ = timing->spans;
}

// Copies still queued or running write into the tier's buffers: the tier finishes them first.
OffloadRuntime::~OffloadRuntime() { tier_.reset(); }

int32_t OffloadRuntime::TakeBuffer() {
  if (!free_buffers_.empty()) {
    const int32_t buffer = free_buffers_.back();
    free_buffers_.pop_back();
    return buffer;
  }
  // Copies may wait for a staging buffer in the simulator; here one more buffer is allocated and
  // reported (buffers_allocated above expert_slots + staging_buffers).
  const int32_t buffer = tier_->AddBuffer();
  buffer_job_.push_back(-1);
  in_use_.push_back(0);
  stats_.buffers_allocated = static_cast<int64_t>(buffer_job_.size());
  return buffer;
}

void OffloadRuntime::FreeBuffer(int32_t buffer) { free_buffers_.push_back(buffer); }

void OffloadRuntime::Load(ExpertRef ref, int priority_class, double priority, bool transient) {
  if (free_buffers_.empty() && !deferred_free_.empty()) {
    // Every buffer is taken and one is about to be freed: an expert this layer still computes
    // was evicted (a layer needing more experts than its cache). The read waits for that
    // computation, as the simulator's copy waits for the victim's last use, instead of growing
    // the cache past its budget.
    pending_.push_back({ref, priority_class, priority, transient});
    slots_[Flat(ref.layer, ref.expert)] = Slot{kPending, -1, transient};
    return;
  }
  const int32_t buffer = TakeBuffer();
  ExpertTier::Copy copy;
  copy.layer = ref.layer;
  copy.expert = ref.expert;
  copy.buffer = buffer;
  copy.priority_class = priority_class;
  copy.priority = priority;
  copy.after = buffer_job_[static_cast<size_t>(buffer)];
  const int64_t id = tier_->Submit(copy);
  ++reads_issued_;
  buffer_job_[static_cast<size_t>(buffer)] = id;
  slots_[Flat(ref.layer, ref.expert)] = Slot{buffer, id, transient};
}

void OffloadRuntime::Drop(ExpertRef ref) {
  Slot& slot = slots_[Flat(ref.layer, ref.expert)];
  if (slot.buffer == kPending) {
    const auto it = std::find_if(pending_.begin(), pending_.end(),
                                 [&](const PendingLoad& p) { return p.ref == ref; });
    if (ref.layer == current_layer_ && layer_buffer_[static_cast<size_t>(ref.expert)] == kPending) {
      it->transient = true;  // this layer still computes it: read, run, drop
    } else {
      pending_.erase(it);
    }
    slot = Slot{};
    return;
  }
  if (slot.buffer < 0)
    throw base::Error("offload runtime: dropping an expert that is not in RAM (a runtime bug)");
  if (in_use_[static_cast<size_t>(slot.buffer)]) {
    deferred_free_.push_back(slot.buffer);
  } else {
    FreeBuffer(slot.buffer);
  }
  slot = Slot{};
}

void OffloadRuntime::BeginPass(const std::string& kind, int64_t tokens, int64_t sequences) {
  policies::IterationInfo info;
  info.index = pass_;
  info.kind = kind;
  info.tokens = tokens;
  info.semantic.assign(static_cast<size_t>(options_.semantic_dim), 0.0f);
  for (int64_t r = 0; r < sequences; ++r) {
    info.requests.push_back(r);
    const std::vector<float> embedding =
        policies::SemanticEmbedding(options_.seed, r, options_.semantic_dim);
    for (size_t i = 0; i < embedding.size(); ++i)
      info.semantic[i] += embedding[i] / static_cast<float>(sequences);
  }
  plan_.Clear();
  policy_->BeginIteration(info, plan_);
  checker_->CheckIterationPlan(plan_);
  ApplyPrefetches(plan_);
  if (options_.record_decisions) {
    stats_.signals.gate_probabilities.emplace_back(static_cast<size_t>(moe_layers_));
    stats_.signals.next_layer_scores.emplace_back(static_cast<size_t>(moe_layers_));
  }
}

void OffloadRuntime::CountSpeculative(const policies::LayerDemand& demand) {
  if (demand.layer > 0 && previous_next_scores_.size() == static_cast<size_t>(experts_)) {
    std::vector<int32_t> order(static_cast<size_t>(experts_));
    for (int32_t e = 0; e < experts_; ++e) order[static_cast<size_t>(e)] = e;
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return previous_next_scores_[a] > previous_next_scores_[b];
    });
    const size_t used = demand.experts.size();
    for (const policies::ExpertDemand& d : demand.experts) {
      stats_.speculative_predicted +=
          std::find(order.begin(), order.begin() + used, d.expert) != order.begin() + used;
    }
    stats_.speculative_used += static_cast<int64_t>(used);
  }
  previous_next_scores_.assign(demand.next_layer_scores.begin(), demand.next_layer_scores.end());
}

void OffloadRuntime::PlanLayer(const policies::LayerDemand& demand,
                               std::vector<int32_t>& run_order) {
  const int32_t layer = demand.layer;
  current_layer_ = layer;
  CountSpeculative(demand);
  if (options_.record_decisions && !stats_.signals.gate_probabilities.empty()) {
    stats_.signals.gate_probabilities.back()[static_cast<size_t>(layer)].assign(
        demand.gate_probabilities.begin(), demand.gate_probabilities.end());
    stats_.signals.next_layer_scores.back()[static_cast<size_t>(layer)].assign(
        demand.next_layer_scores.begin(), demand.next_layer_scores.end());
  }
  plan_.Clear();
  policy_->PlanLayer(demand, plan_);
  checker_->CheckDecisionCount(demand.experts, plan_);
  for (const ExpertRef& ref : plan_.discard_staged) {
    if (checker_->ApplyDiscard(ref)) ++stats_.prefetches_wasted;
    if (options_.record_decisions) policies::RecordDiscard(stats_.decisions, pass_, ref);
    Drop(ref);
  }
  checker_->CheckDecisionOrder(demand.experts, plan_);
  // Experts of this layer already in RAM keep their buffers until computed, even when a later
  // decision of the same layer evicts them (a layer that needs more experts than its cache).
  layer_buffer_.assign(static_cast<size_t>(experts_), -1);
  layer_job_.assign(static_cast<size_t>(experts_), -1);
  runs_on_host_.assign(static_cast<size_t>(experts_), 0);
  for (const policies::ExpertDemand& d : demand.experts) {
    const Slot& slot = slots_[Flat(layer, d.expert)];
    if (slot.buffer >= 0) in_use_[static_cast<size_t>(slot.buffer)] = 1;
    if (slot.buffer == kPending)
      throw base::Error(
          "offload runtime: a read still waits for a buffer at its layer (a runtime bug)");
  }
  run_order.clear();
  // Plain hits first, then the rest in the policy's order (as the simulator's engine).
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const ExpertDecision& decision = plan_.decisions[i];
      const bool plain_hit = decision.action == ExpertAction::kResident && !decision.promote;
      if (plain_hit != (round == 0)) continue;
      const ExpertRef ref{layer, decision.expert};
      const policies::PlanChecker::Effects effects = checker_->ApplyDecision(layer, decision);
      if (options_.record_decisions)
        policies::RecordDecision(stats_.decisions, pass_, layer, decision, effects);
      ++stats_.activations;
      ++stats_.layer_activations[static_cast<size_t>(layer)];
      // The slot the expert runs from, before an eviction can clear it.
      if (effects.evicted) {
        if (effects.evicted_unused_prefetch) ++stats_.prefetches_wasted;
        Drop(*effects.evicted);
      }
      switch (decision.action) {
        case ExpertAction::kResident: {
          const Slot& slot = slots_[Flat(layer, decision.expert)];
          if (slot.job >= 0 && tier_->Done(slot.job)) {
            ++stats_.hits;
          } else {
            ++stats_.inflight_hits;
          }
          ++stats_.layer_hits[static_cast<size_t>(layer)];
          if (effects.used_prefetch) ++stats_.prefetches_used;
          break;
        }
        case ExpertAction::kFetch:
          ++(decision.target == FetchTarget::kCache ? stats_.demand_fetches
                                                    : stats_.transient_fetches);
          Load(ref, 0, 0, decision.target != FetchTarget::kCache);
          break;
        case ExpertAction::kCpu:
          ++stats_.storage_runs;
          if (tier_->has_host_compute()) {
            runs_on_host_[static_cast<size_t>(decision.expert)] = 1;  // from the host's copy
          } else {
            Load(ref, 0, 0, true);
          }
          break;
      }
      const Slot& slot = slots_[Flat(layer, decision.expert)];
      layer_buffer_[static_cast<size_t>(decision.expert)] = slot.buffer;
      layer_job_[static_cast<size_t>(decision.expert)] = slot.job;
      if (slot.buffer >= 0) in_use_[static_cast<size_t>(slot.buffer)] = 1;
      run_order.push_back(decision.expert);
    }
  }
  // Reads waiting for a buffer run last: the computations that free their buffers come first.
  std::stable_partition(run_order.begin(), run_order.end(),
                        [&](int32_t e) { return layer_job_[static_cast<size_t>(e)] >= 0; });
  ApplyPrefetches(plan_);
}

void OffloadRuntime::ApplyPrefetches(const policies::LayerPlan& plan) {
  for (const policies::PrefetchRequest& request : plan.prefetches) {
    const policies::PlanChecker::Effects effects = checker_->ApplyPrefetch(request);
    if (options_.record_decisions)
      policies::RecordPrefetch(stats_.decisions, pass_, request, effects);
    if (effects.evicted) {
      if (effects.evicted_unused_prefetch) ++stats_.prefetches_wasted;
      Drop(*effects.evicted);
    }
    ++stats_.prefetches;
    Load(request.expert, request.urgent ? 0 : 1, request.priority, false);
  }
}

const FfnWeights& OffloadRuntime::Acquire(int32_t moe_layer, int32_t expert) {
  const FfnWeights* weights = tier_->HostWeights(AcquireBuffer(moe_layer, expert));
  if (weights == nullptr)
    throw base::Error("offload runtime: this tier's experts live on a device (a runtime bug)");
  return *weights;
}

int32_t OffloadRuntime::AcquireBuffer(int32_t /*moe_layer*/, int32_t expert) {
  if (runs_on_host_[static_cast<size_t>(expert)])
    throw base::Error("offload runtime: expert " + std::to_string(expert) +
                      " runs on the host and has no buffer (a runtime bug)");
  if (layer_job_[static_cast<size_t>(expert)] < 0) {
    // Still waiting for a buffer that only a later computation frees: read into one more buffer
    // (reported in buffers_allocated) rather than deadlock.
    const ExpertRef ref{current_layer_, expert};
    const auto it = std::find_if(pending_.begin(), pending_.end(),
                                 [&](const PendingLoad& p) { return p.ref == ref; });
    if (it == pending_.end())
      throw base::Error("offload runtime: expert " + std::to_string(expert) +
                        " acquired without a read (a runtime bug)");
    const PendingLoad load = *it;
    pending_.erase(it);
    const int32_t buffer = TakeBuffer();
    FreeBuffer(buffer);
    slots_[Flat(ref.layer, ref.expert)] = Slot{};
    std::vector<int32_t> deferred;
    deferred.swap(deferred_free_);  // Load must not queue it again
    Load(load.ref, load.priority_class, load.priority, load.transient);
    deferred_free_.swap(deferred);
    const Slot& slot = slots_[Flat(ref.layer, ref.expert)];
    layer_buffer_[static_cast<size_t>(expert)] = slot.buffer;
    layer_job_[static_cast<size_t>(expert)] = slot.job;
    in_use_[static_cast<size_t>(slot.buffer)] = 1;
  }
  const int64_t job = layer_job_[static_cast<size_t>(expert)];
  if (options_.timeline && !tier_->Done(job)) {
    // A tier that counts its stall as it waits (storage) has the wait drawn as that stall, ending
    // now, so the timeline and stall_s hold the same seconds: a clock of the runtime's own around
    // the call would add the reader's locking and any preemption of this thread between them. A
    // tier that counts its stall later (the GPU's events, at the pass's end) draws the call.
    const auto start = ExecutionTimeline::Clock::now();
    const double stalled_before_s = tier_->stall_s();
    tier_->Wait(job);
    const auto end = ExecutionTimeline::Clock::now();
    const double stalled_s = tier_->stall_s() - stalled_before_s;
    options_.timeline->Add(
        ExecutionTimeline::Kind::kWait, current_layer_, expert, ExecutionTimeline::kComputeLane,
        stalled_s > 0 ? end - std::chrono::duration_cast<ExecutionTimeline::Clock::duration>(
                                  std::chrono::duration<double>(stalled_s))
                      : start,
        end);
  } else {
    tier_->Wait(job);
  }
  return layer_buffer_[static_cast<size_t>(expert)];
}

void OffloadRuntime::Release(int32_t moe_layer, int32_t expert) {
  const int32_t buffer = layer_buffer_[static_cast<size_t>(expert)];
  tier_->Released(buffer);
  in_use_[static_cast<size_t>(buffer)] = 0;
  Slot& slot = slots_[Flat(moe_layer, expert)];
  if (slot.transient && slot.buffer == buffer) {
    FreeBuffer(buffer);
    slot = Slot{};
  }
  for (size_t i = 0; i < deferred_free_.size();) {
    if (!in_use_[static_cast<size_t>(deferred_free_[i])]) {
      FreeBuffer(deferred_free_[i]);
      deferred_free_.erase(deferred_free_.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  // Reads that waited for a buffer, in the order they were decided.
  while (!pending_.empty() && (!free_buffers_.empty() || deferred_free_.empty())) {
    const PendingLoad load = pending_.front();
    pending_.erase(pending_.begin());
    Load(load.ref, load.priority_class, load.priority, load.transient);
    if (load.ref.layer == current_layer_) {
      const Slot& slot = slots_[Flat(load.ref.layer, load.ref.expert)];
      layer_buffer_[static_cast<size_t>(load.ref.expert)] = slot.buffer;
      layer_job_[static_cast<size_t>(load.ref.expert)] = slot.job;
      in_use_[static_cast<size_t>(slot.buffer)] = 1;
    }
  }
}

void OffloadRuntime::EndPass() {
  tier_->PassEnded();
  policy_->EndIteration();
  ++pass_;
  ++stats_.passes;
}

OffloadStats OffloadRuntime::Stats() const {
  OffloadStats stats = stats_;
  // Reads issued (a prefetch of the last layer may still be landing; it completes regardless).
  stats.reads = reads_issued_ - stats_.initial_reads;
  stats.bytes_read_storage = static_cast<double>(stats.reads) * tier_->bytes_per_copy();
  stats.stall_s = tier_->stall_s();
  if (const std::optional<ExpertTier::CopyTiming> timing = tier_->copy_timing()) {
    stats.copy_busy_s = timing->busy_s;
    stats.copies_done = timing->copies_done;
    stats.read_spans = timing->spans - initial_spans_;
  }
  stats.copy_block_bytes = tier_->bytes_per_copy();
  return stats;
}

PreparedStore PrepareExpertStore(const ExecutorConfig& config, const std::string& weights_source,
                                 const std::filesystem::path& dir,
                                 const std::function<void(ExpertStoreWriter&)>& write_experts) {
  const ExpertStoreKey key = ExpertStoreKeyFor(config, weights_source);
  // Held until the store is open: a second run asking for the same store waits, then reuses it.
  const ExpertStoreLock lock(dir, key, &std::cerr);
  PreparedStore prepared;
  prepared.store = ExpertStore::Open(dir, key);
  if (prepared.store) {
    prepared.reused = true;
    return prepared;
  }
  const Clock::time_point start = Clock::now();
  {
    // Stores of a gigabyte and more take long enough to want a size, the free space and progress.
    constexpr double kProgressFromBytes = 1e9;
    const bool large = static_cast<double>(key.block_bytes()) *
                           static_cast<double>(key.moe_layers * key.experts) >=
                       kProgressFromBytes;
    ExpertStoreWriter writer(dir, key, large ? &std::cerr : nullptr);
    write_experts(writer);
    writer.Commit();
  }
  prepared.build_s = Since(start);
  prepared.store = ExpertStore::Open(dir, key);
  if (!prepared.store)
    throw base::Error(StoreManifestPath(dir, key).string() +
                      ": the expert store just written does not open");
  return prepared;
}

}  // namespace moelab::executor::offload
