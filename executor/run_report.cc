#include "executor/run_report.h"

#include <sstream>

#include "report/format.h"
#include "report/row_set.h"

namespace moelab::executor {
namespace {

using report::FormatBytes;
using report::FormatNumber;
using report::FormatSeconds;
using report::RowSet;

void AddOperatorRows(const OperatorTimes& t, RowSet& rows) {
  // In the report's key order (operator_times_s).
  for (const auto& [name, seconds] : {std::pair<const char*, double>{"attention", t.attention_s},
                                      {"experts", t.experts_s},
                                      {"lm_head", t.lm_head_s},
                                      {"other", t.other_s},
                                      {"router", t.router_s},
                                      {"total", t.total()}})
    rows.Add({std::string("time in ") + name, FormatSeconds(seconds)});
}

void AddSdRows(const RunSdStats& sd, RowSet& rows) {
  rows.Add({"SD speedup (vs plain decode, same run)", FormatNumber(sd.speedup, 3)});
  rows.Add({"SD sigma", FormatNumber(sd.sigma, 3)});
  rows.Add({"SD target efficiency", FormatNumber(sd.target_efficiency, 3)});
  rows.Add({"SD rounds", std::to_string(sd.rounds)});
}

// The expert cache's figures (before, only in --json): hits, reads, prefetches, stall.
void AddOffloadRows(const offload::OffloadStats& o, RowSet& rows) {
  rows.Add({"offload policy", o.policy});
  rows.Add({"expert cache hit rate", FormatNumber(o.hit_rate(), 3)});
  rows.Add({"expert reads (+ initial placement)",
            std::to_string(o.reads) + " (+ " + std::to_string(o.initial_reads) + ")"});
  rows.Add({"bytes read from the slow tier", FormatBytes(o.bytes_read_storage)});
  rows.Add({"prefetches (used, wasted)", std::to_string(o.prefetches) + " (" +
                                             std::to_string(o.prefetches_used) + ", " +
                                             std::to_string(o.prefetches_wasted) + ")"});
  rows.Add({"stall (compute waiting for experts)", FormatSeconds(o.stall_s)});
  if (const std::optional<double> rate = o.copy_bytes_per_s())
    rows.Add({"expert copy bandwidth", FormatBytes(*rate) + "/s"});
  if (o.speculative_used > 0) {
    rows.Add({"speculative gate recall", FormatNumber(static_cast<double>(o.speculative_predicted) /
                                                          static_cast<double>(o.speculative_used),
                                                      3)});
  }
  if (!o.warning.empty()) rows.Add({"offload warning", o.warning});
}

}  // namespace

std::string RunReportText(const RunResult& r) {
  std::ostringstream text;
  text << "moelab run: " << ToString(r.workload) << " on " << r.model.config.name << " ("
       << FormatBytes(r.model.weight_bytes) << " of weights, " << r.model.weights_source
       << "), batch " << r.batch << ", prompt " << r.prompt_tokens << ", " << r.output_tokens
       << " output tokens, " << r.machine.isa << " x " << r.machine.threads << " threads\n";
  RowSet rows({{"metric", "metric"}, {"value", "value"}});
  rows.Add({"TTFT", FormatSeconds(r.ttft_s)});
  rows.Add({"TPOT", r.tpot_s ? FormatSeconds(*r.tpot_s) : std::string("-")});
  if (r.tokens_per_s) rows.Add({"tokens/s", FormatNumber(*r.tokens_per_s, 2)});
  rows.Add({"weight bytes per token", FormatBytes(r.weight_bytes_per_token)});
  if (r.decode_weight_bandwidth_bytes_per_s) {
    rows.Add(
        {"decode weight bandwidth", FormatBytes(*r.decode_weight_bandwidth_bytes_per_s) + "/s"});
  }
  AddOperatorRows(r.operator_times, rows);
  if (r.sd) AddSdRows(*r.sd, rows);
  if (r.offload) AddOffloadRows(*r.offload, rows);
  text << rows.ToTable() << "(--json for per-step times, expert token counts and outputs)\n";
  return text.str();
}

}  // namespace moelab::executor
