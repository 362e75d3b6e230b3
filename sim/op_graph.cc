#include "sim/op_graph.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "base/error.h"

namespace moelab::sim {

std::string ResourceName(Resource resource) {
  switch (resource) {
    case Resource::kAcceleratorCompute:
      return "accelerator_compute";
    case Resource::kCpuCompute:
      return "cpu_compute";
    case Resource::kHostToDevice:
      return "host_to_device";
    case Resource::kDeviceToHost:
      return "device_to_host";
    case Resource::kStorageRead:
      return "storage_read";
    case Resource::kNone:
      return "none";
  }
  return "?";
}

int32_t OpGraph::NewSlot() {
  ops_.emplace_back();
  return static_cast<int32_t>(ops_.size() - 1);
}

void OpGraph::ThrowBadDuration(Seconds duration_s) {
  throw base::Error("sim: op duration must be >= 0, got " + std::to_string(duration_s));
}

void OpGraph::AddEdge(OpHandle before, OpHandle after) {
  int32_t edge;
  if (free_edges_ >= 0) {
    edge = free_edges_;
    free_edges_ = edges_[static_cast<size_t>(edge)].next;
  } else {
    edge = static_cast<int32_t>(edges_.size());
    edges_.emplace_back();
  }
  Op& first = at(before);
  edges_[static_cast<size_t>(edge)] = {after.index, after.generation, first.first_edge};
  first.first_edge = edge;
  ++at(after).pending;
}

// A bookkeeping op (its end now plus its duration) or one that waits in its resource's heap.
void OpGraph::ReadyElse(int32_t index) {
  Op& op = ops_[static_cast<size_t>(index)];
  if (op.resource == Resource::kNone) {
    op.start_s = events_.now_s();
    op.end_s = op.start_s + op.duration_s;
    events_.Push(op.end_s, index);
    return;
  }
  const Waiting waiting{op.priority_class, op.priority, ready_sequence_++, index};
  waiting_mask_ |= 1u << static_cast<unsigned>(op.resource);
  std::vector<Waiting>& queue = waiting_[static_cast<size_t>(op.resource)];
  queue.push_back(waiting);
  std::push_heap(queue.begin(), queue.end(), Later);
}

void OpGraph::Fifo::Grow() {
  std::vector<Waiting> grown(std::max<size_t>(16, 2 * ring.size()));
  size_t n = 0;
  for (; head != tail; ++head) grown[n++] = ring[head & mask()];
  ring.swap(grown);
  head = 0;
  tail = static_cast<uint32_t>(n);
}

// Inlined into Dispatch: a call and the checks around it were a sixth of an op's bookkeeping.
__attribute__((always_inline)) inline int32_t OpGraph::TakeNext(size_t resource) {
  Fifo& fifo = fifo_[resource];
  std::vector<Waiting>& queue = waiting_[resource];
  int32_t index;
  if (!fifo.empty() && (queue.empty() || Later(queue.front(), fifo.front()))) {
    index = fifo.Pop();
  } else {
    std::pop_heap(queue.begin(), queue.end(), Later);
    index = queue.back().index;
    queue.pop_back();
  }
  if (queue.empty() && fifo.empty()) waiting_mask_ &= ~(1u << resource);
  return index;
}

void OpGraph::ShareResource(Resource resource, int concurrent) {
  if (resource == Resource::kNone || concurrent < 1)
    throw base::Error("sim: a shared resource needs a real resource and at least 1 op at once");
  concurrent_[static_cast<size_t>(resource)] = concurrent;
  shared_[static_cast<size_t>(resource)] = true;
  shared_mask_ |= 1u << static_cast<unsigned>(resource);
}

void OpGraph::SetRateWhileBusy(Resource shared, Resource busy, uint32_t kinds, double rate) {
  if (shared == Resource::kNone || busy == Resource::kNone || shared == busy ||
      !shared_[static_cast<size_t>(shared)])
    throw base::Error("sim: a rate while busy couples a shared resource to another resource");
  if (!(rate > 0) || !std::isfinite(rate))
    throw base::Error("sim: a rate while busy must be > 0, got " + std::to_string(rate));
  if (rate_while_busy_[static_cast<size_t>(shared)].busy != Resource::kNone)
    throw base::Error("sim: a shared resource's rate follows one other resource at most");
  rate_while_busy_[static_cast<size_t>(shared)] = {busy, kinds, rate, 0};
  followers_[static_cast<size_t>(busy)] |= 1u << static_cast<unsigned>(shared);
}

double OpGraph::SharedRate(size_t resource) const {
  const RateWhileBusy& coupling = rate_while_busy_[resource];
  return coupling.running > 0 ? coupling.rate : 1.0;
}

void OpGraph::NoteBusyChange(const Op& op, bool busy) {
  for (uint32_t followers = followers_[static_cast<size_t>(op.resource)]; followers != 0;
       followers &= followers - 1) {
    const size_t r = static_cast<size_t>(std::countr_zero(followers));
    RateWhileBusy& coupling = rate_while_busy_[r];
    if (!(coupling.kinds >> op.kind & 1u)) continue;
    const bool was_active = coupling.running > 0;
    const bool active = coupling.running + (busy ? 1 : -1) > 0;
    if (was_active != active) AdvanceShared(r);  // at the rate until now
    coupling.running += busy ? 1 : -1;
    if (was_active != active && !running_[r].empty()) RescheduleShared(r);
  }
}

void OpGraph::AdvanceShared(size_t resource) {
  std::vector<Running>& running = running_[resource];
  const Seconds now = events_.now_s();
  if (!running.empty()) {
    const Seconds each =
        (now - advanced_s_[resource]) * SharedRate(resource) / static_cast<double>(running.size());
    for (Running& r : running) r.alone_s = std::max(0.0, r.alone_s - each);
  }
  advanced_s_[resource] = now;
}

void OpGraph::RescheduleShared(size_t resource) {
  const double share = static_cast<double>(running_[resource].size()) / SharedRate(resource);
  for (const Running& r : running_[resource]) {
    Op& op = ops_[static_cast<size_t>(r.index)];
    op.end_s = events_.now_s() + r.alone_s * share;
    if (op.end_event != UINT64_MAX) stale_events_.insert(op.end_event);
    events_.Push(op.end_s, r.index);
    op.end_event = events_.pushed() - 1;
  }
}

bool OpGraph::Stale(const EventQueue::Event& event) {
  return !stale_events_.empty() && stale_events_.erase(event.sequence) > 0;
}

// Inlined into Run's loops, as Finish.
__attribute__((always_inline)) inline void OpGraph::Dispatch() {
  // Resources in index order, the shared ones first, as a walk over all of them would visit them.
  for (uint32_t ready = waiting_mask_ & shared_mask_; ready != 0; ready &= ready - 1) {
    const size_t r = static_cast<size_t>(std::countr_zero(ready));
    if (static_cast<int>(running_[r].size()) >= concurrent_[r]) continue;
    AdvanceShared(r);
    const size_t already_running = running_[r].size();
    while (static_cast<int>(running_[r].size()) < concurrent_[r] &&
           !(waiting_[r].empty() && fifo_[r].empty())) {
      const int32_t index = TakeNext(r);
      Op& op = ops_[static_cast<size_t>(index)];
      op.start_s = events_.now_s();
      busy_s_[r] += op.duration_s;  // the resource's busy time: the work, at the full rate
      running_[r].push_back({index, op.duration_s});
    }
    RescheduleShared(r);
    // A resource coupled to these ops changes rate now (brought up to now at its old rate first).
    for (size_t i = already_running; i < running_[r].size(); ++i)
      MaybeNoteBusyChange(ops_[static_cast<size_t>(running_[r][i].index)], true);
  }
  // The idle ones among the others, in index order.
  for (uint32_t ready = waiting_mask_ & ~shared_mask_ & ~busy_mask_; ready != 0;
       ready &= ready - 1) {
    const size_t r = static_cast<size_t>(std::countr_zero(ready));
    const int32_t index = TakeNext(r);
    Op& op = ops_[static_cast<size_t>(index)];
    // The end kept in a register for the push: read back from the op, it waited on the store of
    // both times (a tenth of a batch-1 run).
    const Seconds start_s = events_.now_s();
    const Seconds end_s = start_s + op.duration_s;
    op.start_s = start_s;
    op.end_s = end_s;
    busy_mask_ |= 1u << r;
    busy_s_[r] += op.duration_s;
    events_.Push(end_s, index);
    MaybeNoteBusyChange(op, true);
  }
}

// Inlined into Run's loops: the call's saves and restores were a twentieth of an op's bookkeeping.
__attribute__((always_inline)) inline void OpGraph::Finish(int32_t index) {
  Op& op = ops_[static_cast<size_t>(index)];
  // The listener's copy, taken before anything below writes the op: read back over those
  // smaller, recent stores (done, a shared op's times) the copy's 16-byte loads would stall on
  // store forwarding, a tenth of a simulation's time. (The listener may add ops, which can move
  // ops_.) Only the other ops of a shared resource change before the listener is called.
  Op finished = op;
  finished.done = true;
  op.done = true;
  if (op.resource != Resource::kNone && shared_[static_cast<size_t>(op.resource)]) {
    const size_t r = static_cast<size_t>(op.resource);
    AdvanceShared(r);
    std::erase_if(running_[r], [&](const Running& running) { return running.index == index; });
    RescheduleShared(r);  // the others speed up
    MaybeNoteBusyChange(op, false);
  } else if (op.resource != Resource::kNone) {
    busy_mask_ &= ~(1u << static_cast<unsigned>(op.resource));
    MaybeNoteBusyChange(op, false);
  }
  const OpHandle handle{index, finished.generation};
  listener_->OnOpDone(handle, finished);
  // Release successors (the listener may have grown ops_: re-fetch by index).
  const int32_t first_edge = ops_[static_cast<size_t>(index)].first_edge;
  if (first_edge >= 0) {
    int32_t edge = first_edge, last = first_edge;
    while (edge >= 0) {
      const Edge e = edges_[static_cast<size_t>(edge)];
      Op& after = ops_[static_cast<size_t>(e.after)];
      if (after.generation == e.generation && !after.done && --after.pending == 0) Ready(e.after);
      last = edge;
      edge = e.next;
    }
    // The whole list back on the free list at once (Ready above adds no edge).
    edges_[static_cast<size_t>(last)].next = free_edges_;
    free_edges_ = first_edge;
    ops_[static_cast<size_t>(index)].first_edge = -1;
  }
  free_ops_.push_back(index);
  --live_ops_;
}

void OpGraph::Run() {
  Dispatch();
  while (!events_.empty()) {
    const EventQueue::Event event = events_.Pop();
    if (!Stale(event)) Finish(static_cast<int32_t>(event.id));
    // Resources choose only after every event of this instant: ops released together compete
    // by priority, not by the order their predecessors happened to finish in.
    if (events_.empty() || events_.next_time_s() > events_.now_s()) Dispatch();
  }
  if (live_ops_ != 0) {
    throw base::Error("sim: " + std::to_string(live_ops_) +
                      " ops never ran (a dependency cycle or a held staging buffer): engine bug");
  }
}

// Run's loop with the stop flag checked after every event (Run checks none: its loop is the
// simulator's hottest). Ops left waiting when it stops are the next pass's business.
void OpGraph::RunUntilStopped() {
  stop_ = false;
  Dispatch();
  while (!events_.empty() && !stop_) {
    const EventQueue::Event event = events_.Pop();
    if (!Stale(event)) Finish(static_cast<int32_t>(event.id));
    if (events_.empty() || events_.next_time_s() > events_.now_s()) Dispatch();
  }
}

}  // namespace moelab::sim
