// The engine's experts: each decision, checked and applied by policies::PlanChecker, becomes ops:
// computations on the accelerator or the CPU, weight copies (after the evicted expert's pending
// use and copy), storage reads, activation transfers, prefetches and staging buffers.
#include "sim/engine.h"

namespace moelab::sim {

using policies::Device;
using policies::ExpertAction;
using policies::ExpertDecision;
using policies::ExpertRef;
using policies::FetchTarget;
using policies::PlanChecker;
using policies::PrefetchRequest;

// Carries out one decision; returns the op after which the expert's output is back on the
// layer's device.
OpHandle Engine::Execute(int32_t layer, int64_t tokens, const ExpertDecision& decision,
                         Device device) {
  ExpertOps& ops = expert_ops_[Flat(layer, decision.expert)];
  ++result_.expert_activations;
  result_.routed_tokens += tokens;
  const PlanChecker::Effects effects = checker_->ApplyDecision(layer, decision);
  if (config_.record_decisions)
    policies::RecordDecision(result_.decisions, pass_, layer, decision, effects);
  switch (decision.action) {
    case ExpertAction::kResident: {
      if (decision.promote) {
        // The victim's slot becomes a staging buffer once its pending use and copy are done.
        const auto [last_use, loading] = FreeSlotOf(effects);
        staging_.Release(effects.evicted ? Join(last_use, loading) : OpHandle{});
      }
      if (graph_.Pending(ops.loading)) {
        ++result_.inflight_hits;
      } else {
        ++result_.hits;
      }
      result_.hit_tokens += tokens;
      if (effects.used_prefetch) ++result_.prefetches_used;
      return RunOnAccelerator(layer, decision.expert, tokens, ops.loading, device, &ops);
    }
    case ExpertAction::kFetch: {
      if (decision.target == FetchTarget::kCache) {
        const auto [last_use, loading] = FreeSlotOf(effects);
        const OpHandle slot_free[2] = {last_use, loading};
        ++result_.demand_fetches;
        const OpHandle copy = Copy(layer, decision.expert, 0, 0, slot_free, false);
        ops.loading = copy;
        return RunOnAccelerator(layer, decision.expert, tokens, copy, device, &ops);
      }
      ++result_.transient_fetches;
      const OpHandle none[2];
      const OpHandle copy = Copy(layer, decision.expert, 0, 0, none, true);
      const OpHandle compute_done =
          RunOnAccelerator(layer, decision.expert, tokens, copy, device, nullptr);
      staging_.Release(last_compute_);
      return compute_done;
    }
    case ExpertAction::kCpu:
      ++result_.cpu_runs;
      if (config_.hardware.compute_device_is_host) {
        // The CPU is the compute device: the expert runs there from a buffer it was read into
        // (the executor's transient read), after the reader's checksum and copy.
        OpHandle weights_ready;
        if (ops.on_storage) {
          const OpHandle none[2];
          weights_ready = Copy(layer, decision.expert, 0, 0, none, false);
        }
        return RunOnAccelerator(layer, decision.expert, tokens, weights_ready, device, nullptr);
      }
      return RunOnCpu(layer, decision.expert, tokens, device, ops);
  }
  return OpHandle{};
}

OpHandle Engine::ActivationTransfer(bool to_accelerator, int64_t tokens, int32_t layer,
                                    int32_t expert) {
  const double bytes = static_cast<double>(tokens) * activation_bytes_per_token_;
  const OpHandle move =
      NewOp(to_accelerator ? Resource::kHostToDevice : Resource::kDeviceToHost,
            to_accelerator ? cost_.HostToDeviceSeconds(bytes) : cost_.DeviceToHostSeconds(bytes),
            kActivation, layer, expert);
  graph_.at(move).bytes = bytes;
  (to_accelerator ? result_.bytes_h2d_activations : result_.bytes_d2h_activations) += bytes;
  return move;
}

OpHandle Engine::RunOnAccelerator(int32_t layer, int32_t expert, int64_t tokens,
                                  OpHandle weights_ready, Device device, ExpertOps* ops) {
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
  if (ops) ops->last_use = compute;
  if (device == Device::kAccelerator) return compute;
  const OpHandle out = ActivationTransfer(false, tokens, layer, expert);
  graph_.AddDependency(compute, out);
  graph_.Commit(out);
  return out;
}

OpHandle Engine::RunOnCpu(int32_t layer, int32_t expert, int64_t tokens, Device device,
                          const ExpertOps& ops) {
  OpHandle in, read;
  if (device == Device::kAccelerator) {
    in = ActivationTransfer(false, tokens, layer, expert);
    graph_.Commit(in);
  }
  if (ops.on_storage) read = StorageRead(layer, expert);
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

OpHandle Engine::StorageRead(int32_t layer, int32_t expert) {
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
OpHandle Engine::Copy(int32_t layer, int32_t expert, uint8_t priority_class, double priority,
                      const OpHandle slot_free[2], bool staging) {
  const double bytes = static_cast<double>(expert_bytes_);
  const OpHandle copy =
      NewOp(expert_copy_resource_, cost_.HostToDeviceSeconds(bytes), kExpertCopy, layer, expert);
  Op& op = graph_.at(copy);
  op.bytes = bytes;
  op.priority_class = priority_class;
  op.priority = priority;
  graph_.AddDependency(slot_free[0], copy);
  graph_.AddDependency(slot_free[1], copy);
  if (expert_ops_[Flat(layer, expert)].on_storage)
    graph_.AddDependency(StorageRead(layer, expert), copy);
  if (staging) staging_.Acquire(copy);
  graph_.Commit(copy);
  result_.bytes_h2d_expert_weights += bytes;
  ++result_.expert_events;
  return copy;
}

// What must finish before the slot the checker evicted can be overwritten: the victim's pending
// use and copy (none when nothing was evicted).
std::pair<OpHandle, OpHandle> Engine::FreeSlotOf(const PlanChecker::Effects& effects) {
  if (!effects.evicted) return {};
  if (effects.evicted_unused_prefetch) ++result_.prefetches_wasted;
  ExpertOps& victim = expert_ops_[Flat(effects.evicted->layer, effects.evicted->expert)];
  const std::pair<OpHandle, OpHandle> busy{victim.last_use, victim.loading};
  victim.loading = OpHandle{};
  return busy;
}

void Engine::Discard(const ExpertRef& ref) {
  if (checker_->ApplyDiscard(ref)) ++result_.prefetches_wasted;
  if (config_.record_decisions) policies::RecordDiscard(result_.decisions, pass_, ref);
  ExpertOps& ops = expert_ops_[Flat(ref.layer, ref.expert)];
  staging_.Release(Join(ops.last_use, ops.loading));
  ops.loading = OpHandle{};
}

void Engine::ApplyPrefetches() {
  for (const PrefetchRequest& request : plan_.prefetches) {
    const PlanChecker::Effects effects = checker_->ApplyPrefetch(request);
    if (config_.record_decisions)
      policies::RecordPrefetch(result_.decisions, pass_, request, effects);
    const ExpertRef ref = request.expert;
    const auto [last_use, loading] = FreeSlotOf(effects);
    const OpHandle slot_free[2] = {last_use, loading};
    const bool staging = request.target == FetchTarget::kStaged;
    const OpHandle copy =
        Copy(ref.layer, ref.expert, request.urgent ? 0 : 1, request.priority, slot_free, staging);
    expert_ops_[Flat(ref.layer, ref.expert)].loading = copy;
    ++result_.prefetches;
  }
}

// A zero-time op after both (or whichever is pending).
OpHandle Engine::Join(OpHandle a, OpHandle b) {
  const bool pa = graph_.Pending(a), pb = graph_.Pending(b);
  if (!pa) return pb ? b : OpHandle{};
  if (!pb) return a;
  const OpHandle join = graph_.NewOp(Resource::kNone, 0, kJoin);
  graph_.AddDependency(a, join);
  graph_.AddDependency(b, join);
  graph_.Commit(join);
  return join;
}

}  // namespace moelab::sim
