#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

#include "sim/event_queue.h"

namespace moelab::sim {

// Resources, each with its own queue and clock (a non-preemptive server).
enum class Resource : uint8_t {
  kAcceleratorCompute,
  kCpuCompute,
  kHostToDevice,  // the accelerator's host-to-device copy engine
  kDeviceToHost,  // the device-to-host copy engine
  kStorageRead,   // the host's storage reader
  kNone,          // a bookkeeping op (joins, starts; a wait of its duration_s, on no resource)
};
inline constexpr int kResourceCount = 5;
std::string ResourceName(Resource resource);  // "accelerator_compute", ...

// A handle to an op; stays valid (and says "done") after the op's slot is reused.
struct OpHandle {
  int32_t index = -1;
  uint32_t generation = 0;
  bool valid() const { return index >= 0; }
};

// An operation on one resource with a fixed duration, started once every op it depends on has
// finished, in priority order among the ops waiting for the same resource: demand ops
// (priority_class 0) before prefetches (class 1), higher `priority` first within a class, then
// first come first served. Non-preemptive. On a resource shared by several ops at once
// (OpGraph::ShareResource), duration_s is the op's time alone; n ops running together each
// progress at 1/n of that rate.
struct Op {
  Seconds duration_s = 0;
  Seconds start_s = 0;
  Seconds end_s = 0;
  double priority = 0;
  Resource resource = Resource::kNone;
  uint8_t priority_class = 0;
  uint8_t kind = 0;  // what the owner uses it for
  int32_t layer = -1, expert = -1;
  int64_t iteration = -1;
  double bytes = 0;
  // Bookkeeping.
  int32_t pending = 0;
  int32_t first_edge = -1;
  uint32_t generation = 0;
  bool done = true;
  // The sequence of the event that finishes it, on a shared resource (none: the maximum).
  uint64_t end_event = UINT64_MAX;
};

// What the owner of an OpGraph does when one of its ops finishes (no void* callbacks).
class OpListener {
 public:
  virtual ~OpListener() = default;
  // Called once per op, in simulated-time order; the op's successors have not been released yet,
  // and the listener may add ops and dependencies.
  virtual void OnOpDone(OpHandle handle, const Op& op) = 0;
};

// A discrete-event engine over a graph of ops. Deterministic: ties in time are broken by the
// order of events, and resources pick their next op only after every event of the current
// instant has been handled, so ops released at the same time compete by priority.
class OpGraph {
 public:
  explicit OpGraph(OpListener* listener) : listener_(listener) {}

  // Up to `concurrent` ops of `resource` run at once, sharing it equally (processor sharing): a
  // disk serving several reads in flight, each at its share of the bandwidth. Without it a
  // resource serves one op at a time (a non-preemptive server; ShareResource(r, 1) serves the same
  // way, at a rate SetRateWhileBusy may change). Before any op of the resource is released.
  void ShareResource(Resource resource, int concurrent);

  // While an op of `busy` whose kind is in `kinds` (a bit per kind) runs, the shared resource
  // `shared` serves at `rate` times its rate alone (every op running on it progresses that much
  // slower or faster): reads from a disk whose reader shares the cores and the memory with the
  // computation (a storage-tier machine), or a computation whose cores the reader takes from
  // while a read is in flight. `shared` must be shared (ShareResource) and follow no other
  // resource yet; `busy` may be shared too (two resources may follow each other); rate > 0.
  // Before any op is released.
  void SetRateWhileBusy(Resource shared, Resource busy, uint32_t kinds, double rate);

  // A new op, not yet released: add its dependencies, then Commit it. Inline: the call was a
  // tenth of building an op.
  OpHandle NewOp(Resource resource, Seconds duration_s, uint8_t kind, int32_t layer = -1,
                 int32_t expert = -1, int64_t iteration = -1) {
    if (!(duration_s >= 0)) [[unlikely]]
      ThrowBadDuration(duration_s);
    int32_t index;
    if (free_ops_.empty()) {
      index = NewSlot();
    } else {
      index = free_ops_.back();
      free_ops_.pop_back();
    }
    Op& op = ops_[static_cast<size_t>(index)];
    const uint32_t generation = op.generation + 1;
    // Every field written once (a default Op assigned first, then overwritten, cost a tenth of
    // the op's bookkeeping).
    op.duration_s = duration_s;
    op.start_s = 0;
    op.end_s = 0;
    op.priority = 0;
    op.resource = resource;
    op.priority_class = 0;
    op.kind = kind;
    op.layer = layer;
    op.expert = expert;
    op.iteration = iteration;
    op.bytes = 0;
    op.pending = 1;  // released by Commit
    op.first_edge = -1;
    op.generation = generation;
    op.done = false;
    op.end_event = UINT64_MAX;
    ++live_ops_;
    return {index, generation};
  }
  Op& at(OpHandle handle) { return ops_[static_cast<size_t>(handle.index)]; }
  // True while the op exists and has not finished.
  bool Pending(OpHandle handle) const {
    if (!handle.valid()) return false;
    const Op& op = ops_[static_cast<size_t>(handle.index)];
    return op.generation == handle.generation && !op.done;
  }
  // `after` runs only once `before` has finished; nothing when `before` is already done (most
  // calls: checked here, without a call).
  void AddDependency(OpHandle before, OpHandle after) {
    if (Pending(before)) AddEdge(before, after);
  }
  // Holds/releases one extra unnamed dependency (a staging buffer, ...).
  void Hold(OpHandle op) { ++at(op).pending; }
  void Release(OpHandle handle) {
    if (--at(handle).pending == 0) Ready(handle.index);
  }
  // The op's dependencies are complete as added: it may start once they finish.
  void Commit(OpHandle op) { Release(op); }

  // Runs until no event is left. Error if ops are left waiting (a dependency cycle).
  void Run();
  // The same, or until the listener calls Stop; a later call goes on from there (the serving
  // simulator runs one pass at a time). Apart from Run so that Run's loop checks no flag.
  void RunUntilStopped();
  void Stop() { stop_ = true; }

  Seconds now_s() const { return events_.now_s(); }
  Seconds busy_s(Resource resource) const { return busy_s_[static_cast<size_t>(resource)]; }
  uint64_t events() const { return events_.pushed(); }
  int64_t live_ops() const { return live_ops_; }

 private:
  struct Edge {
    int32_t after = -1;
    uint32_t generation = 0;
    int32_t next = -1;
  };
  struct Waiting {
    uint8_t priority_class;
    double priority;
    uint64_t sequence;
    int32_t index;
  };
  static bool Later(const Waiting& a, const Waiting& b) {  // heap order: best on top
    if (a.priority_class != b.priority_class) return a.priority_class > b.priority_class;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.sequence > b.sequence;
  }
  int32_t NewSlot();  // a new op at the end of ops_ (none free)
  void AddEdge(OpHandle before, OpHandle after);
  // An op whose dependencies are done waits for its resource. Inline for a demand op at priority
  // 0 (nearly every op: a push on its resource's FIFO); the others out of line (ReadyElse).
  void Ready(int32_t index) {
    const Op& op = ops_[static_cast<size_t>(index)];
    if (op.resource != Resource::kNone && op.priority_class == 0 && op.priority == 0) [[likely]] {
      waiting_mask_ |= 1u << static_cast<unsigned>(op.resource);
      fifo_[static_cast<size_t>(op.resource)].Push(
          {op.priority_class, op.priority, ready_sequence_++, index});
      return;
    }
    ReadyElse(index);
  }
  void ReadyElse(int32_t index);
  void Dispatch();
  // Shared resources: each running op's time alone still to go, brought up to now; then every
  // running op's end at the current share, each with a new event (the old ones go stale).
  void AdvanceShared(size_t resource);
  void RescheduleShared(size_t resource);
  // The rate a shared resource serves at now (1, or the coupled rate while its busy op runs).
  double SharedRate(size_t resource) const;
  // An op starts or ends: a shared resource coupled to its resource and kind may change rate.
  void NoteBusyChange(const Op& op, bool busy);
  // The same, called only where a shared resource follows the op's resource and kind (most ops
  // have none: the call and its checks were a tenth of an op's bookkeeping).
  void MaybeNoteBusyChange(const Op& op, bool busy) {
    if (followers_[static_cast<size_t>(op.resource)] != 0 && op.kind < 32) NoteBusyChange(op, busy);
  }
  // An event a reschedule replaced (removed from stale_events_ as it is popped).
  bool Stale(const EventQueue::Event& event);
  // The best waiting op of a resource (its queue is not empty), removed.
  int32_t TakeNext(size_t resource);
  void Finish(int32_t index);
  [[gnu::cold, gnu::noinline]] static void ThrowBadDuration(Seconds duration_s);

  OpListener* listener_;
  std::vector<Op> ops_;
  std::vector<int32_t> free_ops_;
  std::vector<Edge> edges_;
  // The free edges, linked through Edge::next (-1: none): a finished op's whole successor list
  // is put back at once, without a push per edge.
  int32_t free_edges_ = -1;
  EventQueue events_;
  std::array<std::vector<Waiting>, kResourceCount> waiting_{};
  // Demand ops at priority 0 (nearly all of them) wait in arrival order here instead of in
  // waiting_'s heap: among themselves the heap would order them by sequence anyway, and the
  // head is compared with the heap's top, so the order is the same at O(1) a push. A ring (a
  // power of two long; head and tail run freely and wrap), so taking never moves items.
  struct Fifo {
    std::vector<Waiting> ring;
    uint32_t head = 0, tail = 0;
    bool empty() const { return head == tail; }
    size_t mask() const { return ring.size() - 1; }
    const Waiting& front() const { return ring[head & mask()]; }
    void Push(const Waiting& waiting) {
      if (tail - head == ring.size()) [[unlikely]]
        Grow();
      ring[tail++ & mask()] = waiting;
    }
    int32_t Pop() { return ring[head++ & mask()].index; }
    [[gnu::noinline]] void Grow();
  };
  std::array<Fifo, kResourceCount> fifo_{};
  // A bit per resource that serves one op at a time: it serves one now.
  uint32_t busy_mask_ = 0;
  // A bit per resource: some op waits for it (in waiting_ or fifo_). Dispatch visits those only.
  uint32_t waiting_mask_ = 0;
  // A bit per resource: shared (ShareResource).
  uint32_t shared_mask_ = 0;
  // [resource]: a bit per shared resource whose rate follows it (SetRateWhileBusy), so the ops of
  // the others start and end without a look at the couplings.
  std::array<uint32_t, kResourceCount> followers_{};
  std::array<int, kResourceCount> concurrent_{1, 1, 1, 1, 1};
  std::array<bool, kResourceCount> shared_{};  // ShareResource was called: processor sharing
  struct Running {
    int32_t index;
    Seconds alone_s;  // time alone still to go
  };
  std::array<std::vector<Running>, kResourceCount> running_{};  // shared resources only
  std::array<Seconds, kResourceCount> advanced_s_{};  // when running_ was last brought up to date
  // SetRateWhileBusy: a shared resource's rate while a coupled op runs (none: kNone).
  struct RateWhileBusy {
    Resource busy = Resource::kNone;
    uint32_t kinds = 0;
    double rate = 1;
    int running = 0;  // coupled ops running now
  };
  std::array<RateWhileBusy, kResourceCount> rate_while_busy_{};
  std::unordered_set<uint64_t> stale_events_;  // by sequence: an op's index may be reused
  std::array<Seconds, kResourceCount> busy_s_{};
  uint64_t ready_sequence_ = 0;
  int64_t live_ops_ = 0;
  bool stop_ = false;  // RunUntilStopped: the listener called Stop
};

}  // namespace moelab::sim
