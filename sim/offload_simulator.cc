#include "sim/offload_simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>

#include "base/error.h"
#include "model/parameter_count.h"
#include "policies/registry.h"
#include "sim/cost_model.h"

namespace moelab::sim {
namespace {

using policies::Device;
using policies::ExpertAction;
using policies::ExpertDecision;
using policies::ExpertRef;
using policies::FetchTarget;
using policies::LayerPlan;
using policies::PrefetchRequest;

enum OpKind : uint8_t {
  kPassStart,
  kEmbedding,
  kDense,
  kHidden,         // hidden states crossing between devices (static-split)
  kExpertCompute,  // on the accelerator or the CPU
  kExpertCopy,     // expert weights host -> accelerator
  kStorage,        // expert weights storage -> host
  kActivation,     // an expert's tokens crossing to the other device and back
  kLmHead,
  kJoin,
};

enum class Where : uint8_t { kNowhere, kCache, kStaging };

struct ExpertState {
  OpHandle loading;   // the copy bringing its weights to the accelerator, while in flight
  OpHandle last_use;  // the latest computation reading its accelerator copy
  Where where = Where::kNowhere;
  bool prefetched = false;  // brought by a prefetch and not used yet
  bool on_storage = false;  // its home copy is on storage, not in host RAM
};

class Engine : public OpListener {
 public:
  Engine(const SimConfig& config, RoutingSource& routing, const RoutingCalibration& calibration,
         SimResult& result)
      : config_(config),
        routing_(routing),
        calibration_(calibration),
        result_(result),
        cost_(config.model, config.hardware, config.cost, config.host_cost.value_or(config.cost),
              config.cpu_threads > 0 ? config.cpu_threads
                                     : (config.hardware.host ? config.hardware.host->cores : 1),
              config.accelerator_costs, config.host_costs),
        graph_(this) {
    const MoeModelSpec& model = config.model;
    layers_ = model.num_layers;
    first_dense_ = model.moe->first_dense_layers;
    moe_layers_ = model.num_moe_layers();
    experts_ = model.moe->num_experts;
    top_k_ = model.moe->top_k;
    expert_bytes_ = ExpertBytes(model);
    activation_bytes_per_token_ =
        static_cast<double>(model.hidden_size) * config.cost.activation_bits / 8.0;
    passes_ = BuildIterations(config.workload);
    if (calibration.popularity.size() != static_cast<size_t>(moe_layers_)) {
      throw Error("sim: the routing calibration has " +
                  std::to_string(calibration.popularity.size()) + " layers, the model " +
                  std::to_string(moe_layers_) + " MoE layers");
    }
    PlanMemoryAndPolicy();
  }

  void Run() {
    StartPass();
    graph_.Run();
    Finish();
  }

  void OnOpDone(OpHandle handle, const Op& op) override {
    if (config_.record_timeline && op.resource != Resource::kNone) {
      result_.timeline.push_back({op.start_s, op.duration_s, op.resource, op.kind, op.layer,
                                  op.expert, op.iteration, op.priority_class == 1});
    }
    switch (op.kind) {
      case kPassStart:
        BeginPass();
        break;
      case kDense:
        if (op.layer >= first_dense_) {
          RouteLayer(op.layer);
        } else {
          outputs_.assign(1, handle);
          AfterLayer(op.layer);
        }
        break;
      case kExpertCopy: {
        ExpertState& state = states_[Flat(op.layer, op.expert)];
        if (state.loading.index == handle.index && state.loading.generation == handle.generation) {
          state.loading = OpHandle{};
        }
        policy_->OnTransferDone({op.layer, op.expert});
        break;
      }
      case kLmHead:
        EndPass();
        break;
      default:
        break;
    }
  }

 private:
  size_t Flat(int64_t layer, int64_t expert) const {
    return static_cast<size_t>(layer * experts_ + expert);
  }
  Resource ComputeOf(Device device) const {
    return device == Device::kAccelerator ? Resource::kAcceleratorCompute : Resource::kCpuCompute;
  }
  [[noreturn]] void PolicyBug(const std::string& what) const {
    throw Error("policy '" + policy_->Name() + "': " + what + " (a policy bug)");
  }
  std::string Name(int64_t layer, int64_t expert) const {
    return "expert " + std::to_string(expert) + " of MoE layer " + std::to_string(layer);
  }

  // ---------------------------------------------------------------------------------------------
  // Set-up: memory tiers, the policy, initial placement.

  void PlanMemoryAndPolicy() {
    const MoeModelSpec& model = config_.model;
    const WeightBytes weights = CountWeightBytes(model);
    const double kv_per_token_layer =
        static_cast<double>(KvCacheBytesPerToken(model, config_.cost.kv_bits)) /
        static_cast<double>(layers_);
    const double kv_per_layer =
        kv_per_token_layer * static_cast<double>(config_.workload.KvTokens());

    policies::OffloadSetup setup;
    setup.num_layers = layers_;
    setup.first_dense_layers = first_dense_;
    setup.num_moe_layers = moe_layers_;
    setup.num_experts = experts_;
    setup.top_k = top_k_;
    setup.expert_bytes = expert_bytes_;
    setup.accelerator_bytes =
        config_.accelerator_bytes.value_or(config_.hardware.accelerator->memory_bytes);
    setup.fixed_bytes = weights.embeddings + weights.lm_head;
    for (int64_t layer = 0; layer < layers_; ++layer) {
      const bool moe = layer >= first_dense_;
      setup.dense_layer_bytes.push_back(
          weights.attention + (moe ? weights.router + weights.shared_experts : weights.dense_ffn) +
          kv_per_layer);
    }
    setup.latency = cost_.FiddlerLatency(expert_bytes_);
    setup.popularity = calibration_.popularity;
    setup.history = calibration_.history;
    setup.seed = config_.seed;
    policy_ = policies::MakeOffloadPolicy(config_.policy, config_.policy_options, setup);
    needs_ = policy_->Needs();

    // Accelerator memory.
    double dense_on_accelerator = 0, dense_on_host = 0;
    for (int64_t layer = 0; layer < layers_; ++layer) {
      dense_device_.push_back(policy_->DenseDevice(layer));
      (dense_device_.back() == Device::kAccelerator ? dense_on_accelerator : dense_on_host) +=
          setup.dense_layer_bytes[static_cast<size_t>(layer)];
    }
    const int64_t staging = policy_->StagingBuffersUsed();
    const double budget = setup.accelerator_bytes - setup.fixed_bytes - dense_on_accelerator -
                          static_cast<double>(staging) * static_cast<double>(expert_bytes_);
    const int64_t available =
        budget > 0 ? static_cast<int64_t>(std::floor(budget / static_cast<double>(expert_bytes_)))
                   : 0;
    cache_capacity_ = policy_->ExpertSlots();
    result_.fits_accelerator = budget >= 0 && cache_capacity_ <= available;
    if (!policy_->IgnoresMemoryLimit() && !result_.fits_accelerator) {
      PolicyBug("asks for " + std::to_string(cache_capacity_) + " expert slots and " +
                std::to_string(staging) + " staging buffers, but accelerator memory holds " +
                std::to_string(available));
    }
    result_.accelerator_bytes = setup.accelerator_bytes;
    result_.fixed_bytes = setup.fixed_bytes;
    result_.dense_bytes_on_accelerator = dense_on_accelerator;
    result_.kv_bytes = kv_per_layer * static_cast<double>(layers_);
    result_.expert_slots = cache_capacity_;
    result_.staging_buffers = staging;
    result_.experts_total = moe_layers_ * experts_;
    result_.latency = setup.latency;
    for (int64_t b = 0; b < staging; ++b) free_buffers_.push_back(OpHandle{});

    // Host RAM holds every expert that fits next to the CPU's dense parts; the least popular
    // rest live on storage.
    states_.assign(static_cast<size_t>(moe_layers_ * experts_), ExpertState{});
    const double host_bytes = config_.hardware.host->dram_bytes - dense_on_host -
                              (dense_on_host > 0 ? setup.fixed_bytes : 0);
    const int64_t host_experts =
        host_bytes > 0
            ? static_cast<int64_t>(std::floor(host_bytes / static_cast<double>(expert_bytes_)))
            : 0;
    const int64_t on_storage = std::max<int64_t>(0, result_.experts_total - host_experts);
    if (!policy_->IgnoresMemoryLimit()) {
      for (const ExpertId& id : PlaceLeastPopular(calibration_.popularity, on_storage)) {
        states_[Flat(id.layer, id.expert)].on_storage = true;
      }
      result_.experts_on_storage = on_storage;
    }

    for (const ExpertRef& ref : policy_->InitialPlacement()) {
      if (ref.layer < 0 || ref.layer >= moe_layers_ || ref.expert < 0 || ref.expert >= experts_) {
        PolicyBug("initial placement names an expert outside the model");
      }
      ExpertState& state = states_[Flat(ref.layer, ref.expert)];
      if (state.where == Where::kCache)
        PolicyBug("initial placement names " + Name(ref.layer, ref.expert) + " twice");
      state.where = Where::kCache;
      ++cache_count_;
      result_.bytes_initial_load += static_cast<double>(expert_bytes_);
    }
    if (cache_count_ > cache_capacity_) PolicyBug("initial placement exceeds its own expert slots");
    semantic_.resize(static_cast<size_t>(config_.workload.batch));
    for (int64_t r = 0; r < config_.workload.batch; ++r) {
      semantic_[static_cast<size_t>(r)] =
          SemanticEmbedding(config_.seed, r, config_.calibration.semantic_dim);
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Passes and layers.

  void StartPass() {
    const OpHandle start = graph_.NewOp(Resource::kNone, 0, kPassStart);
    graph_.Commit(start);
  }

  void BeginPass() {
    const Iteration& pass = passes_[static_cast<size_t>(pass_)];
    shape_.batch = pass.batch;
    shape_.tokens_per_sequence = pass.tokens_per_sequence;
    shape_.context_length = pass.context_length;
    shape_.logits_for_all_positions = pass.logits_for_all_positions;
    tokens_ = pass.tokens();
    dense_[0] = &cost_.Dense(Device::kAccelerator, shape_);
    dense_[1] = needs_cpu_dense() ? &cost_.Dense(Device::kCpu, shape_) : dense_[0];

    policies::IterationInfo info;
    info.index = pass_;
    info.kind = pass.kind;
    info.tokens = tokens_;
    info.requests = pass.requests;
    info.semantic.assign(static_cast<size_t>(config_.calibration.semantic_dim), 0.0f);
    for (int64_t request : pass.requests) {
      const std::vector<float>& embedding = semantic_[static_cast<size_t>(request)];
      for (size_t i = 0; i < embedding.size(); ++i) {
        info.semantic[i] += embedding[i] / static_cast<float>(pass.requests.size());
      }
    }
    plan_.Clear();
    policy_->BeginIteration(info, plan_);
    if (!plan_.decisions.empty() || !plan_.discard_staged.empty()) {
      PolicyBug("BeginIteration may only prefetch");
    }
    ApplyPrefetches();

    const Device first = dense_device_[0];
    const OpHandle embedding =
        NewOp(ComputeOf(first), DenseOf(first).embedding_s, kEmbedding, -1, -1);
    graph_.Commit(embedding);
    outputs_.assign(1, embedding);
    ScheduleDense(0);
  }

  bool needs_cpu_dense() const {
    return std::find(dense_device_.begin(), dense_device_.end(), Device::kCpu) !=
           dense_device_.end();
  }
  const CostModel::DenseCost& DenseOf(Device device) const {
    return *dense_[device == Device::kAccelerator ? 0 : 1];
  }

  OpHandle NewOp(Resource resource, Seconds duration_s, uint8_t kind, int32_t layer,
                 int32_t expert) {
    const OpHandle handle = graph_.NewOp(resource, duration_s, kind);
    Op& op = graph_.at(handle);
    op.layer = layer;
    op.expert = expert;
    op.iteration = pass_;
    return handle;
  }

  // The dense part of layer `layer`, after outputs_ (moving the hidden states when the previous
  // layer ran on the other device).
  void ScheduleDense(int64_t layer) {
    const Device device = dense_device_[static_cast<size_t>(layer)];
    const Device previous = layer == 0 ? device : dense_device_[static_cast<size_t>(layer - 1)];
    if (previous != device) MoveHidden(device);
    const OpHandle dense =
        NewOp(ComputeOf(device), DenseOf(device).layer_s[static_cast<size_t>(layer)], kDense,
              static_cast<int32_t>(layer), -1);
    for (const OpHandle& before : outputs_) graph_.AddDependency(before, dense);
    graph_.Commit(dense);
  }

  // Hidden states of the whole pass to `device`; replaces outputs_ with the transfer.
  void MoveHidden(Device device) {
    const double bytes = static_cast<double>(tokens_) * activation_bytes_per_token_;
    const bool to_accelerator = device == Device::kAccelerator;
    const OpHandle move =
        NewOp(to_accelerator ? Resource::kHostToDevice : Resource::kDeviceToHost,
              to_accelerator ? cost_.HostToDeviceSeconds(bytes) : cost_.DeviceToHostSeconds(bytes),
              kHidden, -1, -1);
    graph_.at(move).bytes = bytes;
    (to_accelerator ? result_.bytes_h2d_activations : result_.bytes_d2h_activations) += bytes;
    for (const OpHandle& before : outputs_) graph_.AddDependency(before, move);
    graph_.Commit(move);
    outputs_.assign(1, move);
  }

  void AfterLayer(int64_t layer) {
    if (layer + 1 < layers_) {
      ScheduleDense(layer + 1);
      return;
    }
    const Device device = dense_device_.back();
    const OpHandle head = NewOp(ComputeOf(device), DenseOf(device).lm_head_s, kLmHead, -1, -1);
    for (const OpHandle& before : outputs_) graph_.AddDependency(before, head);
    graph_.Commit(head);
  }

  void EndPass() {
    const Seconds now = graph_.now_s();
    if (pass_ == 0) result_.ttft_s = now;
    result_.total_s = now;
    policy_->EndIteration();
    ++pass_;
    if (pass_ < static_cast<int64_t>(passes_.size())) StartPass();
  }

  void RouteLayer(int64_t layer) {
    const int32_t moe_layer = static_cast<int32_t>(layer - first_dense_);
    routing_.Route(pass_, moe_layer, tokens_, routed_);
    counts_.assign(static_cast<size_t>(experts_), 0);
    for (const std::vector<int32_t>& token : routed_) {
      for (int32_t expert : token) ++counts_[static_cast<size_t>(expert)];
    }
    demand_.clear();
    for (int64_t e = 0; e < experts_; ++e) {
      if (counts_[static_cast<size_t>(e)] > 0)
        demand_.push_back({static_cast<int32_t>(e), counts_[static_cast<size_t>(e)]});
    }
    gate_.clear();
    if (needs_.gate_probabilities) {
      GateProbabilities(counts_, tokens_, top_k_,
                        calibration_.popularity[static_cast<size_t>(moe_layer)],
                        config_.calibration.gate_residual_mass, gate_);
    }
    next_scores_.clear();
    if (needs_.next_layer_scores && moe_layer + 1 < moe_layers_ &&
        static_cast<size_t>(moe_layer) < calibration_.transition.size()) {
      next_scores_.assign(static_cast<size_t>(experts_), 0.0f);
      const std::vector<float>& matrix = calibration_.transition[static_cast<size_t>(moe_layer)];
      for (const policies::ExpertDemand& d : demand_) {
        const float* row = &matrix[static_cast<size_t>(d.expert * experts_)];
        const float weight = static_cast<float>(d.tokens);
        for (int64_t next = 0; next < experts_; ++next)
          next_scores_[static_cast<size_t>(next)] += weight * row[next];
      }
    }
    policies::LayerDemand demand;
    demand.layer = moe_layer;
    demand.tokens = tokens_;
    demand.experts = demand_;
    demand.gate_probabilities = gate_;
    demand.next_layer_scores = next_scores_;
    plan_.Clear();
    policy_->PlanLayer(demand, plan_);
    if (plan_.decisions.size() != demand_.size()) {
      PolicyBug("planned " + std::to_string(plan_.decisions.size()) + " experts for a demand of " +
                std::to_string(demand_.size()));
    }
    for (const ExpertRef& ref : plan_.discard_staged) Discard(ref);
    outputs_.clear();
    const Device device = dense_device_[static_cast<size_t>(layer)];
    for (size_t i = 0; i < demand_.size(); ++i) {
      if (plan_.decisions[i].expert != demand_[i].expert)
        PolicyBug("decisions out of the demand's order");
    }
    // Plain hits first, then everything else in the policy's order: a plan decides hits against
    // the cache as the previous layer left it, so a later promotion or fetch of the same layer
    // may evict one of them (when the layer needs more experts than its cache holds); the
    // computation exists by then, and the slot's new copy waits for it.
    for (int round = 0; round < 2; ++round) {
      for (size_t i = 0; i < demand_.size(); ++i) {
        const ExpertDecision& decision = plan_.decisions[i];
        const bool plain_hit = decision.action == ExpertAction::kResident && !decision.promote;
        if (plain_hit == (round == 0)) {
          outputs_.push_back(Execute(moe_layer, demand_[i].tokens, decision, device));
        }
      }
    }
    ApplyPrefetches();
    AfterLayer(layer);
  }

  // ---------------------------------------------------------------------------------------------
  // Experts.

  // Carries out one decision; returns the op after which the expert's output is back on the
  // layer's device.
  OpHandle Execute(int32_t layer, int64_t tokens, const ExpertDecision& decision, Device device) {
    ExpertState& state = states_[Flat(layer, decision.expert)];
    ++result_.expert_activations;
    result_.routed_tokens += tokens;
    switch (decision.action) {
      case ExpertAction::kResident: {
        if (state.where == Where::kNowhere) {
          PolicyBug("runs " + Name(layer, decision.expert) +
                    " as resident, but it is not on the accelerator");
        }
        if (decision.promote) {
          if (state.where != Where::kStaging)
            PolicyBug("promotes " + Name(layer, decision.expert) + ", which is not staged");
          if (decision.evict) {
            const auto [last_use, loading] = Evict(*decision.evict, "promote");
            ReleaseBuffer(Join(last_use, loading));  // the victim's slot becomes a staging buffer
          } else {
            ReserveSlot();
            ReleaseBuffer(OpHandle{});
          }
          state.where = Where::kCache;
        } else if (decision.evict) {
          PolicyBug("evicts without a fetch or promotion");
        }
        if (graph_.Pending(state.loading)) {
          ++result_.inflight_hits;
        } else {
          ++result_.hits;
        }
        result_.hit_tokens += tokens;
        if (state.prefetched) {
          state.prefetched = false;
          ++result_.prefetches_used;
        }
        return RunOnAccelerator(layer, decision.expert, tokens, state.loading, device, &state);
      }
      case ExpertAction::kFetch: {
        if (state.where != Where::kNowhere) {
          PolicyBug("fetches " + Name(layer, decision.expert) +
                    ", which is already on the accelerator");
        }
        if (decision.target == FetchTarget::kCache) {
          OpHandle slot_free[2];
          if (decision.evict) {
            const auto [last_use, loading] = Evict(*decision.evict, "fetch");
            slot_free[0] = last_use;
            slot_free[1] = loading;
          } else {
            ReserveSlot();
          }
          ++result_.demand_fetches;
          const OpHandle copy = Copy(layer, decision.expert, 0, 0, slot_free, false);
          state.where = Where::kCache;
          state.loading = copy;
          return RunOnAccelerator(layer, decision.expert, tokens, copy, device, &state);
        }
        if (decision.target != FetchTarget::kTransient)
          PolicyBug("fetches into a staged buffer on demand");
        if (decision.evict) PolicyBug("evicts for a transient fetch");
        ++result_.transient_fetches;
        OpHandle none[2];
        const OpHandle copy = Copy(layer, decision.expert, 0, 0, none, true);
        const OpHandle compute_done =
            RunOnAccelerator(layer, decision.expert, tokens, copy, device, nullptr);
        ReleaseBuffer(last_compute_);
        return compute_done;
      }
      case ExpertAction::kCpu: {
        if (decision.evict || decision.promote) PolicyBug("evicts or promotes for a CPU run");
        ++result_.cpu_runs;
        return RunOnCpu(layer, decision.expert, tokens, device, state);
      }
    }
    return OpHandle{};
  }

  OpHandle ActivationTransfer(bool to_accelerator, int64_t tokens, int32_t layer, int32_t expert) {
    const double bytes = static_cast<double>(tokens) * activation_bytes_per_token_;
    const OpHandle move =
        NewOp(to_accelerator ? Resource::kHostToDevice : Resource::kDeviceToHost,
              to_accelerator ? cost_.HostToDeviceSeconds(bytes) : cost_.DeviceToHostSeconds(bytes),
              kActivation, layer, expert);
    graph_.at(move).bytes = bytes;
    (to_accelerator ? result_.bytes_h2d_activations : result_.bytes_d2h_activations) += bytes;
    return move;
  }

  OpHandle RunOnAccelerator(int32_t layer, int32_t expert, int64_t tokens, OpHandle weights_ready,
                            Device device, ExpertState* state) {
    OpHandle in;
    if (device == Device::kCpu) {
      in = ActivationTransfer(true, tokens, layer, expert);
      graph_.Commit(in);
    }
    const OpHandle compute =
        NewOp(Resource::kAcceleratorCompute, cost_.ExpertSeconds(Device::kAccelerator, tokens),
              kExpertCompute, layer, expert);
    graph_.AddDependency(weights_ready, compute);
    graph_.AddDependency(in, compute);
    graph_.Commit(compute);
    ++result_.expert_events;
    last_compute_ = compute;
    if (state) state->last_use = compute;
    if (device == Device::kAccelerator) return compute;
    const OpHandle out = ActivationTransfer(false, tokens, layer, expert);
    graph_.AddDependency(compute, out);
    graph_.Commit(out);
    return out;
  }

  OpHandle RunOnCpu(int32_t layer, int32_t expert, int64_t tokens, Device device,
                    const ExpertState& state) {
    OpHandle in, read;
    if (device == Device::kAccelerator) {
      in = ActivationTransfer(false, tokens, layer, expert);
      graph_.Commit(in);
    }
    if (state.on_storage) read = StorageRead(layer, expert);
    const OpHandle compute = NewOp(Resource::kCpuCompute, cost_.ExpertSeconds(Device::kCpu, tokens),
                                   kExpertCompute, layer, expert);
    graph_.AddDependency(in, compute);
    graph_.AddDependency(read, compute);
    graph_.Commit(compute);
    ++result_.expert_events;
    if (device == Device::kCpu) return compute;
    const OpHandle out = ActivationTransfer(true, tokens, layer, expert);
    graph_.AddDependency(compute, out);
    graph_.Commit(out);
    return out;
  }

  OpHandle StorageRead(int32_t layer, int32_t expert) {
    const double bytes = static_cast<double>(expert_bytes_);
    const OpHandle read =
        NewOp(Resource::kStorageRead, cost_.StorageReadSeconds(bytes), kStorage, layer, expert);
    graph_.at(read).bytes = bytes;
    graph_.Commit(read);
    result_.bytes_storage_read += bytes;
    ++result_.expert_events;
    return read;
  }

  // Expert weights host -> accelerator, after `slot_free` (the evicted expert's pending use and
  // copy) and, from storage, a storage read; into a staging buffer when `staging`.
  OpHandle Copy(int32_t layer, int32_t expert, uint8_t priority_class, double priority,
                const OpHandle slot_free[2], bool staging) {
    const double bytes = static_cast<double>(expert_bytes_);
    const OpHandle copy = NewOp(Resource::kHostToDevice, cost_.HostToDeviceSeconds(bytes),
                                kExpertCopy, layer, expert);
    Op& op = graph_.at(copy);
    op.bytes = bytes;
    op.priority_class = priority_class;
    op.priority = priority;
    graph_.AddDependency(slot_free[0], copy);
    graph_.AddDependency(slot_free[1], copy);
    if (states_[Flat(layer, expert)].on_storage)
      graph_.AddDependency(StorageRead(layer, expert), copy);
    if (staging) AcquireBuffer(copy);
    graph_.Commit(copy);
    result_.bytes_h2d_expert_weights += bytes;
    ++result_.expert_events;
    return copy;
  }

  // Removes a cached expert; returns what must finish before its slot can be overwritten.
  std::pair<OpHandle, OpHandle> Evict(const ExpertRef& ref, const char* why) {
    if (ref.layer < 0 || ref.layer >= moe_layers_ || ref.expert < 0 || ref.expert >= experts_) {
      PolicyBug(std::string("evicts an expert outside the model (") + why + ")");
    }
    ExpertState& victim = states_[Flat(ref.layer, ref.expert)];
    if (victim.where != Where::kCache)
      PolicyBug("evicts " + Name(ref.layer, ref.expert) + ", which is not cached");
    victim.where = Where::kNowhere;
    if (victim.prefetched) {
      victim.prefetched = false;
      ++result_.prefetches_wasted;
    }
    const std::pair<OpHandle, OpHandle> busy{victim.last_use, victim.loading};
    victim.loading = OpHandle{};
    return busy;
  }

  void ReserveSlot() {
    if (++cache_count_ > cache_capacity_) {
      PolicyBug("fills more than its " + std::to_string(cache_capacity_) + " expert slots");
    }
  }

  void Discard(const ExpertRef& ref) {
    if (ref.layer < 0 || ref.layer >= moe_layers_ || ref.expert < 0 || ref.expert >= experts_) {
      PolicyBug("discards an expert outside the model");
    }
    ExpertState& state = states_[Flat(ref.layer, ref.expert)];
    if (state.where != Where::kStaging)
      PolicyBug("discards " + Name(ref.layer, ref.expert) + ", which is not staged");
    state.where = Where::kNowhere;
    if (state.prefetched) {
      state.prefetched = false;
      ++result_.prefetches_wasted;
    }
    ReleaseBuffer(Join(state.last_use, state.loading));
    state.loading = OpHandle{};
  }

  void ApplyPrefetches() {
    for (const PrefetchRequest& request : plan_.prefetches) {
      const ExpertRef ref = request.expert;
      if (ref.layer < 0 || ref.layer >= moe_layers_ || ref.expert < 0 || ref.expert >= experts_) {
        PolicyBug("prefetches an expert outside the model");
      }
      ExpertState& state = states_[Flat(ref.layer, ref.expert)];
      if (state.where != Where::kNowhere)
        PolicyBug("prefetches " + Name(ref.layer, ref.expert) + ", which is already there");
      OpHandle slot_free[2];
      bool staging = false;
      if (request.target == FetchTarget::kCache) {
        if (request.evict) {
          const auto [last_use, loading] = Evict(*request.evict, "prefetch");
          slot_free[0] = last_use;
          slot_free[1] = loading;
        } else {
          ReserveSlot();
        }
      } else if (request.target == FetchTarget::kStaged) {
        if (request.evict) PolicyBug("evicts for a staged prefetch (staged experts do not evict)");
        staging = true;
      } else {
        PolicyBug("prefetches into a transient buffer");
      }
      const OpHandle copy = Copy(ref.layer, ref.expert, 1, request.priority, slot_free, staging);
      state.where = staging ? Where::kStaging : Where::kCache;
      state.loading = copy;
      state.prefetched = true;
      ++result_.prefetches;
    }
  }

  // A zero-time op after both (or whichever is pending).
  OpHandle Join(OpHandle a, OpHandle b) {
    const bool pa = graph_.Pending(a), pb = graph_.Pending(b);
    if (!pa) return pb ? b : OpHandle{};
    if (!pb) return a;
    const OpHandle join = graph_.NewOp(Resource::kNone, 0, kJoin);
    graph_.AddDependency(a, join);
    graph_.AddDependency(b, join);
    graph_.Commit(join);
    return join;
  }

  // Staging buffers: a free list of "usable after this op" handles and a FIFO of ops waiting.
  void AcquireBuffer(OpHandle op) {
    if (result_.staging_buffers == 0) PolicyBug("uses a staging buffer but reserves none");
    if (!free_buffers_.empty()) {
      graph_.AddDependency(free_buffers_.front(), op);
      free_buffers_.pop_front();
      return;
    }
    graph_.Hold(op);
    buffer_waiters_.push_back(op);
  }

  void ReleaseBuffer(OpHandle after) {
    if (!buffer_waiters_.empty()) {
      const OpHandle waiter = buffer_waiters_.front();
      buffer_waiters_.pop_front();
      graph_.AddDependency(after, waiter);
      graph_.Release(waiter);
      return;
    }
    free_buffers_.push_back(after);
    if (static_cast<int64_t>(free_buffers_.size()) > result_.staging_buffers) {
      PolicyBug("releases more staging buffers than it holds");
    }
  }

  // ---------------------------------------------------------------------------------------------

  void Finish() {
    SimResult& r = result_;
    r.passes = pass_;
    const double later = static_cast<double>(config_.workload.output_tokens - 1);
    const double decode_s = r.total_s - r.ttft_s;
    const double batch = static_cast<double>(config_.workload.batch);
    switch (config_.workload.kind) {
      case WorkloadKind::kPrefill:
        r.tokens_per_s = batch * static_cast<double>(config_.workload.prompt_tokens) / r.ttft_s;
        break;
      case WorkloadKind::kBeam:
        if (later > 0) {
          r.tpot_s = decode_s / later;
          r.tokens_per_s = later / decode_s;
        }
        break;
      default:
        if (later > 0) {
          r.tpot_s = decode_s / later;
          r.tokens_per_s = batch * later / decode_s;
        }
        break;
    }
    for (int i = 0; i < kResourceCount; ++i) r.busy_s[i] = graph_.busy_s(static_cast<Resource>(i));
    r.events = graph_.events();
    r.policy_stats = policy_->Stats();
    r.policy_options = policy_->ResolvedOptions();
    r.expert_bytes = expert_bytes_;
    r.accelerator_name = cost_.accelerator_name();
    r.cpu_name = cost_.cpu_name();
    r.compute_dtype = cost_.compute_dtype();
    r.cost_source = config_.cost_source;
    r.cpu_threads = cost_.cpu_threads();
  }

  const SimConfig& config_;
  RoutingSource& routing_;
  const RoutingCalibration& calibration_;
  SimResult& result_;
  CostModel cost_;
  OpGraph graph_;
  std::unique_ptr<policies::OffloadPolicy> policy_;
  policies::PolicyNeeds needs_;

  int64_t layers_ = 0, first_dense_ = 0, moe_layers_ = 0, experts_ = 0, top_k_ = 0;
  int64_t expert_bytes_ = 0;
  double activation_bytes_per_token_ = 0;
  std::vector<Iteration> passes_;
  std::vector<Device> dense_device_;
  std::vector<std::vector<float>> semantic_;  // [request]

  std::vector<ExpertState> states_;
  int64_t cache_count_ = 0, cache_capacity_ = 0;
  std::deque<OpHandle> free_buffers_, buffer_waiters_;

  // The current pass.
  int64_t pass_ = 0;
  int64_t tokens_ = 0;
  ForwardShape shape_;
  const CostModel::DenseCost* dense_[2] = {nullptr, nullptr};
  std::vector<OpHandle> outputs_;
  OpHandle last_compute_;
  LayerPlan plan_;
  std::vector<std::vector<int32_t>> routed_;
  std::vector<int64_t> counts_;
  std::vector<policies::ExpertDemand> demand_;
  std::vector<float> gate_, next_scores_;
};

}  // namespace

void SimConfig::Validate() const {
  ValidateModelSpec(model, model.name);
  if (!model.is_moe())
    throw Error("--model " + model.name + ": a dense model has no experts to offload");
  cost.Validate();
  workload.Validate();
  calibration.Validate();
  if (accelerator_bytes && !(*accelerator_bytes > 0 && std::isfinite(*accelerator_bytes))) {
    throw Error("--accelerator-memory must be a positive size");
  }
  if (cpu_threads < 0)
    throw Error("--cpu-threads must be >= 0 (0: all cores), got " + std::to_string(cpu_threads));
}

double SimResult::hit_rate() const {
  return expert_activations > 0
             ? static_cast<double>(hits + inflight_hits) / static_cast<double>(expert_activations)
             : 0;
}

double SimResult::token_hit_rate() const {
  return routed_tokens > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(routed_tokens)
                           : 0;
}

SimResult SimulateOffload(const SimConfig& config, RoutingSource& routing,
                          const RoutingCalibration& calibration) {
  config.Validate();
  SimResult result;
  result.model = config.model.name;
  result.hardware = config.hardware.name;
  result.policy = config.policy;
  result.routing = routing.Describe();
  result.calibration_source = calibration.source;
  result.calibration_in_sample = calibration.in_sample;
  result.workload = config.workload;
  result.seed = config.seed;
  Engine engine(config, routing, calibration, result);
  engine.Run();
  return result;
}

SimResult SimulateOffload(const SimConfig& config) {
  config.Validate();
  const MoeModelSpec& model = config.model;
  std::unique_ptr<RoutingSource> routing =
      MakeRoutingSource(config.routing, model.num_moe_layers(), model.moe->num_experts,
                        model.moe->top_k, config.seed);
  if (!routing) {
    throw Error(
        "--routing gate: the simulator has no model gate; use uniform, popularity:FILE, "
        "correlated:... or trace:FILE");
  }
  const RoutingCalibration calibration =
      CalibrateRouting(config.routing, model.num_moe_layers(), model.moe->num_experts,
                       model.moe->top_k, config.seed, config.calibration);
  return SimulateOffload(config, *routing, calibration);
}

}  // namespace moelab::sim
