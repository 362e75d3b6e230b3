#pragma once

#include <cassert>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"

namespace moelab::sim {

using Seconds = double;

// The simulator's clock: a binary min-heap of events keyed by (time_s, sequence). Events at the
// same time come out in the order they were pushed (the sequence number breaks ties), so a run is
// a deterministic function of its inputs. Time never goes backwards: pushing an event earlier than
// the current time is a bug (assert in debug builds, moelab::Error always).
class EventQueue {
 public:
  struct Event {
    Seconds time_s = 0;
    uint64_t sequence = 0;
    int64_t id = 0;  // what the event is about (the simulator's op index)
  };

  // Error when time_s < now_s() or is not finite.
  void Push(Seconds time_s, int64_t id) {
    if (!(time_s >= now_s_) || !std::isfinite(time_s)) [[unlikely]]
      ThrowInPast(time_s);
    const Event event{time_s, next_sequence_++, id};
    heap_.push_back(event);
    SiftUp(heap_.size() - 1, event);
  }

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  Seconds now_s() const { return now_s_; }
  // Time of the next event; only when !empty().
  Seconds next_time_s() const { return heap_.front().time_s; }
  uint64_t pushed() const { return next_sequence_; }

  // Removes and returns the earliest event and advances the clock to it.
  Event Pop() {
    // Field by field: the front was written by a sift whose stores a whole-event load would
    // straddle (a store-forwarding stall on every event).
    const Event& front = heap_.front();
    const Event top{front.time_s, front.sequence, front.id};
    // The back likewise: a push just wrote it (a 16-byte load over its 8-byte stores stalled,
    // an eighth of a batch-1 run's time).
    const Event& back = heap_.back();
    const Event last{back.time_s, back.sequence, back.id};
    heap_.pop_back();
    if (!heap_.empty()) SiftDown(0, last);
    assert(top.time_s >= now_s_);
    now_s_ = top.time_s;
    return top;
  }

 private:
  // Out of line and cold: the message's strings, inlined, cost every push a few instructions.
  [[gnu::cold, gnu::noinline]] void ThrowInPast(Seconds time_s) const {
    assert(false && "event scheduled in the past");
    throw base::Error("sim: event at " + std::to_string(time_s) +
                      " s scheduled before the current time " + std::to_string(now_s_) + " s");
  }
  static bool Before(const Event& a, const Event& b) {
    return a.time_s != b.time_s ? a.time_s < b.time_s : a.sequence < b.sequence;
  }
  // `moving` is the event at i, passed in registers: reading back the element just written would
  // stall on store forwarding (a 16-byte load over 8-byte stores), a tenth of a simulation's time.
  void SiftUp(size_t i, const Event moving) {
    while (i > 0) {
      const size_t parent = (i - 1) / 2;
      if (!Before(moving, heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = moving;
  }
  void SiftDown(size_t i, const Event moving) {
    const size_t n = heap_.size();
    for (;;) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
      if (!Before(heap_[child], moving)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = moving;
  }

  std::vector<Event> heap_;
  Seconds now_s_ = 0;
  uint64_t next_sequence_ = 0;
};

}  // namespace moelab::sim
