#pragma once

#include <cstdint>
#include <deque>

#include "sim/op_graph.h"

namespace moelab::sim {

// The staging buffers' timing: a free list of "usable after this op" handles and a FIFO of copies
// waiting for a buffer (held until one is released). How many buffers a policy may use is
// checked by policies::PlanChecker before any op is built; this only orders the ops.
class StagingBuffers {
 public:
  explicit StagingBuffers(OpGraph& graph) : graph_(graph) {}

  void Reset(int64_t buffers) {
    free_.assign(static_cast<size_t>(buffers), OpHandle{});
    waiters_.clear();
  }

  // `copy` (not yet committed) lands in a buffer: after the buffer's last user, or when one is
  // released.
  void Acquire(OpHandle copy) {
    if (!free_.empty()) {
      graph_.AddDependency(free_.front(), copy);
      free_.pop_front();
      return;
    }
    graph_.Hold(copy);
    waiters_.push_back(copy);
  }

  // A buffer is free once `after` is done.
  void Release(OpHandle after) {
    if (!waiters_.empty()) {
      const OpHandle waiter = waiters_.front();
      waiters_.pop_front();
      graph_.AddDependency(after, waiter);
      graph_.Release(waiter);
      return;
    }
    free_.push_back(after);
  }

 private:
  OpGraph& graph_;
  std::deque<OpHandle> free_, waiters_;
};

}  // namespace moelab::sim
