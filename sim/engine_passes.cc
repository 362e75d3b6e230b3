// The engine's passes: the dense part of each layer on the device the policy names (moving the
// hidden states between devices), then for a MoE layer its routing, the gate's stand-ins, the
// policy's checked plan and the experts; the LM head ends the pass.
#include <algorithm>
#include <limits>

#include "sim/engine.h"
#include "policies/gate_standins.h"

namespace moelab::sim {

using policies::Device;
using policies::ExpertAction;
using policies::ExpertDecision;
using policies::ExpertRef;

void Engine::StartPass() {
  const OpHandle start = graph_.NewOp(Resource::kNone, 0, kPassStart);
  graph_.Commit(start);
}

void Engine::BeginPass() {
  const Iteration& pass = passes_[static_cast<size_t>(pass_)];
  shape_.batch = pass.batch;
  shape_.tokens_per_sequence = pass.tokens_per_sequence;
  shape_.context_length = pass.context_length;
  shape_.logits_for_all_positions = pass.logits_for_all_positions;
  // A beam step ranks every beam's next tokens over the vocabulary after its pass.
  shape_.ranked_rows = pass.kind == "beam" ? pass.batch : 0;
  tokens_ = pass.tokens();
  // Where the host computes, the first pass runs from DRAM (SetUp) and the passes after one that
  // read from storage too; the others in the planned RAM's working set.
  if (config_.hardware.compute_device_is_host) {
    if (result_.bytes_storage_read > 0) {
      if (!result_.compute_from_dram_from_pass) ComputeFromDram();
    } else if (pass_ == 1) {
      SetComputeWorkingSet(result_.compute_working_set_bytes);
      result_.compute_in_working_set_from_pass = pass_;
    }
  }
  dense_[0] = &cost_.Dense(Device::kAccelerator, shape_);
  dense_[1] = needs_cpu_dense() ? &cost_.Dense(Device::kCpu, shape_) : dense_[0];
  if (serving_) {
    pass_begin_s_ = graph_.now_s();
    pass_resident_s_ = dense_[0]->embedding_s + dense_[0]->lm_head_s;
    for (const Seconds layer_s : dense_[0]->layer_s)
      pass_resident_s_ += layer_s + config_.layer_overhead_s;
  }

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
  checker_->CheckIterationPlan(plan_);
  ApplyPrefetches();

  const Device first = dense_device_[0];
  const OpHandle embedding =
      NewOp(ComputeOf(first), DenseOf(first).embedding_s, kEmbedding, -1, -1);
  graph_.Commit(embedding);
  outputs_.assign(1, embedding);
  ScheduleDense(0);
}

// On the executor's machine the weights a pass reuses (LM head, attention, the experts in RAM)
// stay in the CPU's last-level cache only while no expert is read during the passes: with reads,
// every pass ran at DRAM speed. Measured on a 2-vCPU Xeon (260 MB L3 shared with other guests),
// standalone `moelab run` decode B=1, interleaved three times each: all experts in RAM, the LM
// head went from 1.39 ms (DRAM) to 0.62 ms over eight passes and the attention layers from 143 to
// 85 us; on-demand at 24 of 32 experts (one to three reads a pass) stayed at 1.18-1.43 ms and
// 124-140 us through every pass, including passes with a single read. Which part of a read does
// it (its DMA and copy through the shared L3, or the idle wait letting other guests in) is not
// separated: a bench putting O_DIRECT reads between LM-head calls of one thread lost 5-25 %, an
// idle 9 ms 30-160 %. The profile's expert_ffn_working_set family measures the undisturbed
// cycle, so the cache regime ends with the first read; the rest of the run is priced as the
// profile's DRAM calls.
void Engine::ComputeFromDram() {
  SetComputeWorkingSet(std::numeric_limits<double>::infinity());
  result_.compute_from_dram_from_pass = pass_;
}

void Engine::SetComputeWorkingSet(double bytes) {
  cost_.SetWorkingSet(Device::kAccelerator, bytes);
  cost_.SetWorkingSet(Device::kCpu, bytes);
}

bool Engine::needs_cpu_dense() const {
  return std::find(dense_device_.begin(), dense_device_.end(), Device::kCpu) != dense_device_.end();
}

const CostModel::DenseCost& Engine::DenseOf(Device device) const {
  return *dense_[device == Device::kAccelerator ? 0 : 1];
}

// The dense part of layer `layer`, after outputs_ (moving the hidden states when the previous
// layer ran on the other device).
void Engine::ScheduleDense(int64_t layer) {
  const Device device = dense_device_[static_cast<size_t>(layer)];
  const Device previous = layer == 0 ? device : dense_device_[static_cast<size_t>(layer - 1)];
  if (previous != device) MoveHidden(device);
  const OpHandle dense =
      NewOp(ComputeOf(device),
            DenseOf(device).layer_s[static_cast<size_t>(layer)] + config_.layer_overhead_s, kDense,
            static_cast<int32_t>(layer), -1);
  for (const OpHandle& before : outputs_) graph_.AddDependency(before, dense);
  graph_.Commit(dense);
}

// Hidden states of the whole pass to `device`; replaces outputs_ with the transfer.
void Engine::MoveHidden(Device device) {
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

void Engine::AfterLayer(int64_t layer) {
  if (layer + 1 < layers_) {
    ScheduleDense(layer + 1);
    return;
  }
  const Device device = dense_device_.back();
  const OpHandle head = NewOp(ComputeOf(device), DenseOf(device).lm_head_s, kLmHead, -1, -1);
  for (const OpHandle& before : outputs_) graph_.AddDependency(before, head);
  graph_.Commit(head);
}

void Engine::EndPass() {
  const Seconds now = graph_.now_s();
  if (pass_ == 0) result_.ttft_s = now;
  result_.total_s = now;
  result_.pass_end_s.push_back(now);
  policy_->EndIteration();
  ++pass_;
  if (serving_) {
    graph_.Stop();  // the serving simulator asks for the next pass when it plans it
  } else if (pass_ < static_cast<int64_t>(passes_.size())) {
    StartPass();
  }
}

// The replayed signal of this pass at `moe_layer`, or nullptr (none recorded there).
const std::vector<float>* Engine::Replayed(
    std::vector<std::vector<std::vector<float>>> policies::GateSignals::*signal,
    int32_t moe_layer) const {
  if (!config_.gate_signals) return nullptr;
  const auto& passes = (*config_.gate_signals).*signal;
  if (pass_ >= static_cast<int64_t>(passes.size())) return nullptr;
  const auto& layers = passes[static_cast<size_t>(pass_)];
  if (moe_layer >= static_cast<int32_t>(layers.size()) ||
      layers[static_cast<size_t>(moe_layer)].empty())
    return nullptr;
  return &layers[static_cast<size_t>(moe_layer)];
}

// This pass's routing at `moe_layer`: read in place from a replayed trace, else routed into
// `buffer`.
const std::vector<std::vector<int32_t>>& Engine::Routed(int32_t moe_layer,
                                                        std::vector<std::vector<int32_t>>& buffer) {
  if (const auto* stored = routing_.Stored(pass_, moe_layer, tokens_)) return *stored;
  routing_.Route(pass_, moe_layer, tokens_, buffer);
  return buffer;
}

void Engine::RouteLayer(int64_t layer) {
  const int32_t moe_layer = static_cast<int32_t>(layer - first_dense_);
  if (next_demand_pass_ == pass_ && next_demand_layer_ == moe_layer) {
    // Counted at the previous layer for the speculative gate's recall, from the same routing (a
    // second Route of the layer would cost as much again: the correlated source's memo follows
    // one step per layer).
    std::swap(counts_, next_counts_);
    std::swap(demand_, next_demand_);
    next_demand_pass_ = -1;
  } else {
    policies::CountDemand(Routed(moe_layer, routed_), experts_, counts_, demand_);
  }
  gate_.clear();
  next_scores_.clear();
  if (const std::vector<float>* replayed =
          Replayed(&policies::GateSignals::gate_probabilities, moe_layer);
      needs_.gate_probabilities && replayed) {
    gate_ = *replayed;
  } else if (needs_.gate_probabilities) {
    policies::GateProbabilities(counts_, tokens_, top_k_,
                                calibration_.popularity[static_cast<size_t>(moe_layer)],
                                config_.calibration.gate_residual_mass, gate_);
  }
  if (const std::vector<float>* replayed =
          Replayed(&policies::GateSignals::next_layer_scores, moe_layer);
      needs_.next_layer_scores && replayed) {
    next_scores_ = *replayed;
  } else if (needs_.next_layer_scores && moe_layer + 1 < moe_layers_ &&
             static_cast<size_t>(moe_layer) < calibration_.transition.size()) {
    policies::SpeculativeNextLayerScores(calibration_.transition[static_cast<size_t>(moe_layer)],
                                         demand_, experts_, next_scores_);
    if (config_.speculative_recall) {
      // The routing sources are pure functions of (step, layer, token): the next layer's routing
      // is known now and is the same when that layer is routed.
      policies::CountDemand(Routed(moe_layer + 1, next_routed_), experts_, next_counts_,
                            next_demand_);
      next_demand_pass_ = pass_;
      next_demand_layer_ = moe_layer + 1;
      policies::ApplySpeculativeRecall(*config_.speculative_recall, config_.seed, pass_,
                                       moe_layer + 1, next_demand_, next_scores_);
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
  checker_->CheckDecisionCount(demand_, plan_);
  if (serving_) [[unlikely]] {
    for (const policies::ExpertDemand& expert : demand_)
      pass_resident_s_ += cost_.ExpertSeconds(Device::kAccelerator, expert.tokens);
  }
  for (const ExpertRef& ref : plan_.discard_staged) Discard(ref);
  outputs_.clear();
  const Device device = dense_device_[static_cast<size_t>(layer)];
  checker_->CheckDecisionOrder(demand_, plan_);
  // Plain hits first, then everything else in the policy's order: a plan decides hits against
  // the cache as the previous layer left it, so a later promotion or fetch of the same layer may
  // evict one of them (when the layer needs more experts than its cache holds); the computation
  // exists by then, and the slot's new copy waits for it.
  // One walk: the hits run as met, the others are kept (in order) for after them.
  deferred_.clear();
  for (size_t i = 0; i < demand_.size(); ++i) {
    const ExpertDecision& decision = plan_.decisions[i];
    if (decision.action == ExpertAction::kResident && !decision.promote) {
      outputs_.push_back(Execute(moe_layer, demand_[i].tokens, decision, device));
    } else {
      deferred_.push_back(i);
    }
  }
  for (const size_t i : deferred_)
    outputs_.push_back(Execute(moe_layer, demand_[i].tokens, plan_.decisions[i], device));
  ApplyPrefetches();
  AfterLayer(layer);
}

}  // namespace moelab::sim
