#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace moelab::executor {

// What the executor's threads did and when (`moelab run --timeline-out`): the compute thread's
// operators, its waits for expert reads, and each reader thread's reads, as the Chrome trace-event
// JSON that `moelab sim offload --trace-out` writes, with the simulator's op names ("dense layer
// L", "expert L1 E3", "storage L1 E3", "copy L1 E3", "lm_head"), so the two timelines of one
// setting open side by side in Perfetto and a miss can be traced to the ops that make it.
// Thread-safe: the reader threads add their reads while the compute thread adds its operators.
class ExecutionTimeline {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Kind : uint8_t {
    kPass,       // a forward pass (its own lane)
    kEmbedding,  // the embedding lookup
    kDense,      // a layer's norms, attention and router (a dense layer: and its FFN)
    kExpert,     // one routed expert's FFN
    kWait,       // the compute thread blocked on an expert read
    kStorage,    // a reader's pread of an expert block
    kCopy,       // the reader's checksum and copy of the block into its buffer
    kLmHead,     // the final norm and the LM head
  };
  // Lanes: the compute thread, the passes, and reader thread i (kReaderLane + i).
  static constexpr int kComputeLane = 0, kPassLane = 1, kReaderLane = 2;

  struct Event {
    Kind kind;
    int32_t layer, expert;  // -1 where the op has none (layer: the MoE layer for experts and reads)
    int64_t pass;
    int lane;
    double start_s, end_s;  // since the timeline began
  };

  // `first_pass`: the model's pass count when the run begins (a model that ran before counts on),
  // so the run's passes are numbered from 0, as the simulator numbers them.
  explicit ExecutionTimeline(int64_t first_pass = 0)
      : origin_(Clock::now()), first_pass_(first_pass) {}

  // The model's pass the events that follow belong to (the compute thread sets it at each pass;
  // recorded as pass - first_pass, and -1 before the first, where the offload runtime reads its
  // initial placement).
  void BeginPass(int64_t pass);
  void Add(Kind kind, int32_t layer, int32_t expert, int lane, Clock::time_point start,
           Clock::time_point end);
  std::vector<Event> events() const;

  // The trace: process 1 is the compute device (`compute_name`), lanes "compute" and "passes";
  // process 2 the expert reader, one lane per reader thread that read anything.
  std::string TraceJson(const std::string& compute_name) const;

 private:
  Clock::time_point origin_;
  int64_t first_pass_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  int64_t pass_ = -1;  // before the first pass: the offload runtime's initial placement
};

// "dense layer 3", "expert L1 E3", "pass 2", ...: the simulator's timeline names (sim/report.cc).
std::string EventName(const ExecutionTimeline::Event& event);

}  // namespace moelab::executor
