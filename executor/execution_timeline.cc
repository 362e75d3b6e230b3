#include "executor/execution_timeline.h"

#include <algorithm>
#include <set>

#include "report/chrome_trace.h"

namespace moelab::executor {
namespace {

const char* Category(ExecutionTimeline::Kind kind) {
  switch (kind) {
    case ExecutionTimeline::Kind::kPass:
      return "pass";
    case ExecutionTimeline::Kind::kEmbedding:
      return "embedding";
    case ExecutionTimeline::Kind::kDense:
      return "dense";
    case ExecutionTimeline::Kind::kExpert:
      return "expert";
    case ExecutionTimeline::Kind::kWait:
      return "wait";
    case ExecutionTimeline::Kind::kStorage:
      return "storage";
    case ExecutionTimeline::Kind::kCopy:
      return "copy";
    case ExecutionTimeline::Kind::kLmHead:
      return "lm_head";
  }
  return "op";
}

}  // namespace

std::string EventName(const ExecutionTimeline::Event& event) {
  std::string name = Category(event.kind);
  if (event.kind == ExecutionTimeline::Kind::kPass) return name + " " + std::to_string(event.pass);
  if (event.expert >= 0)
    return name + " L" + std::to_string(event.layer) + " E" + std::to_string(event.expert);
  if (event.layer >= 0) return name + " layer " + std::to_string(event.layer);
  return name;
}

void ExecutionTimeline::BeginPass(int64_t pass) {
  std::lock_guard<std::mutex> lock(mutex_);
  pass_ = pass - first_pass_;
}

void ExecutionTimeline::Add(Kind kind, int32_t layer, int32_t expert, int lane,
                            Clock::time_point start, Clock::time_point end) {
  const auto seconds = [&](Clock::time_point t) {
    return std::chrono::duration<double>(t - origin_).count();
  };
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(Event{kind, layer, expert, pass_, lane, seconds(start), seconds(end)});
}

std::vector<ExecutionTimeline::Event> ExecutionTimeline::events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_;
}

std::string ExecutionTimeline::TraceJson(const std::string& compute_name) const {
  std::vector<Event> events = this->events();
  std::stable_sort(events.begin(), events.end(),
                   [](const Event& a, const Event& b) { return a.start_s < b.start_s; });
  std::set<int> readers;
  for (const Event& e : events) {
    if (e.lane >= kReaderLane) readers.insert(e.lane);
  }
  const auto lane = [](int l) { return l < kReaderLane ? std::pair{1, l + 1} : std::pair{2, l}; };
  report::ChromeTrace trace;
  const auto thread_name = [&](int l, const std::string& name) {
    const auto [pid, tid] = lane(l);
    trace.ThreadName(pid, tid, name);
  };
  trace.ProcessName(1, "executor: " + compute_name);
  trace.ProcessName(2, "executor: expert reader");
  thread_name(kComputeLane, "compute thread");
  thread_name(kPassLane, "passes");
  for (int l : readers) thread_name(l, "reader " + std::to_string(l - kReaderLane));
  for (const Event& e : events) {
    const auto [pid, tid] = lane(e.lane);
    trace.Complete(EventName(e), Category(e.kind), e.start_s, e.end_s - e.start_s, pid, tid,
                   e.pass);
  }
  return trace.Finish();
}

}  // namespace moelab::executor
