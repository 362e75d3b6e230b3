#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace moelab::report {

// A Chrome trace-event JSON file (opens in Perfetto / chrome://tracing): the one writer behind the
// simulator's timeline (`sim offload --trace-out`) and the executor's (`run --timeline-out`), so
// the two put the same op names on the same lanes in the same format and compare side by side.
// Metadata events name processes and threads; complete events ("ph":"X") carry times in
// microseconds with three decimals and args {"pass": N}. One event per line; same events, same
// bytes.
class ChromeTrace {
 public:
  ChromeTrace();

  // "process_name" / "thread_name" metadata events.
  void ProcessName(int pid, std::string_view name);
  void ThreadName(int pid, int tid, std::string_view name);
  // A complete event from `start_s` lasting `duration_s` (seconds) on lane (pid, tid).
  void Complete(std::string_view name, std::string_view category, double start_s, double duration_s,
                int pid, int tid, int64_t pass);

  // A counter event ("ph":"C"): the track `name` of process `pid` takes `values` (series name ->
  // value) from `time_s` on (Perfetto draws one track per series: queue length, KV blocks used).
  void Counter(std::string_view name, double time_s, int pid,
               const std::vector<std::pair<std::string_view, double>>& values);

  // The whole file; the trace is left empty.
  std::string Finish();

 private:
  std::string out_;
  bool empty_ = true;
};

}  // namespace moelab::report
