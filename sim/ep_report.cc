// EpResult's printers: JSON (moelab.sim-ep/1), the sweep's rows (table, CSV), the Chrome trace.
#include "report/chrome_trace.h"
#include "report/format.h"
#include "sim/ep_simulator.h"

namespace moelab::sim {
namespace {

nlohmann::json RowJson(const EpChunkRow& row) {
  return {{"chunks", row.chunks},
          {"gemm", row.gemm},
          {"dispatch_s", row.dispatch_s},
          {"combine_s", row.combine_s},
          {"expert_compute_s", row.expert_compute_s},
          {"busiest_excess_s", row.busiest_excess_s},
          {"mean_rank_compute_s", row.mean_rank_compute_s},
          {"row_gather_scatter_s", row.row_gather_scatter_s},
          {"pack_combine_s", row.pack_combine_s},
          {"moe_block_s", row.moe_block_s},
          {"exposed_comm_s", row.exposed_comm_s},
          {"step_s", row.step_s},
          {"tokens_per_s", row.tokens_per_s}};
}

template <typename T>
nlohmann::json OrNull(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

report::Cell Seconds(double seconds) { return seconds; }

std::string SecondsText(const report::Cell& cell) {
  return report::FormatSeconds(std::get<double>(cell));
}

}  // namespace

nlohmann::json EpResult::ToJson() const {
  const EpConfig& c = config;
  nlohmann::json json;
  json["schema"] = "moelab.sim_ep/1";
  json["model"] = c.model.name;
  json["hardware"] = c.node.name;
  json["layout"] = {{"ep", c.ep},
                    {"tp", c.tp},
                    {"attention", ToString(c.attention)},
                    {"devices_per_replica", c.devices()},
                    {"replicas", replicas},
                    {"node_accelerators", c.node.accelerator_count}};
  json["workload"] = {{"kind", ToString(c.workload)},
                      {"batch", c.batch},
                      {"tokens", c.tokens},
                      {"tokens_per_step", tokens_per_step}};
  json["cost_source"] = cost_source;
  json["collective_cost"] = collective_cost;
  json["routing"] = {{"local_experts", local_experts},
                     {"active_local_experts", active_local_experts},
                     {"tokens_per_expert", tokens_per_expert},
                     {"device_limit", c.device_limit},
                     {"comm_bits", c.comm_bits}};
  json["chunks"] = chosen.chunks;
  json["chunks_chosen_by"] = chunks_chosen_by;
  json["step_s"] = chosen.step_s;
  json["tokens_per_s"] = chosen.tokens_per_s;
  json["gain_vs_no_pipeline"] = gain_vs_no_pipeline();
  json["no_pipeline"] = RowJson(no_pipeline);
  json["pipeline"] = RowJson(chosen);
  json["optimum"] = RowJson(optimum);
  json["per_layer"] = {{"attention_s", attention_s},
                       {"moe_collectives_s", moe_collectives_s},
                       {"shared_experts_s", shared_experts_s},
                       {"dense_layer_s", dense_layer_s},
                       {"once_per_step_s", once_per_step_s},
                       {"row_copy_bytes_per_s", copy_bytes_per_s},
                       {"row_copies_from", row_copies_from},
                       {"moe_layers", c.model.num_moe_layers()},
                       {"dense_layers", c.model.num_dense_layers()}};
  json["closed_form"] = {{"communication_s", closed_form.communication_s},
                         {"computation_s", closed_form.computation_s},
                         {"overhead_per_chunk_s", closed_form.overhead_per_chunk_s},
                         {"continuous_optimum", OrNull(closed_form.continuous_optimum)},
                         {"optimal_chunks", OrNull(closed_form.optimal_chunks)},
                         {"sweep_optimal_chunks", optimum.chunks}};
  json["gemm"] = {{"choice", ToString(c.gemm)},
                  {"crossover_tokens_per_expert", OrNull(gemm_crossover_tokens)},
                  {"crossover_from", gemm_crossover_from},
                  {"paper_crossover_tokens", model::kDefaultGemmCrossoverTokens},
                  {"group_efficiency", c.group_efficiency}};
  json["sm_share"] = {
      {"comm_sms", c.comm_sms},
      {"compute_sms", compute_sms},
      {"sm_count", c.node.accelerator && c.compute_on_node ? c.node.accelerator->sm_count : 0},
      {"comm_saturation_sms", c.comm_saturation_sms},
      {"communication_overlaps_compute", c.communication_overlaps_compute}};
  json["sweep"] = SweepRows().ToJson();
  return json;
}

report::RowSet EpResult::SweepRows() const {
  report::RowSet rows(
      {{"chunks", "N"},
       {"gemm", "GEMM"},
       {"dispatch_s", "dispatch", SecondsText},
       {"combine_s", "combine", SecondsText},
       {"expert_compute_s", "expert GEMMs", SecondsText},
       {"busiest_excess_s", "of which busiest rank's excess", SecondsText},
       {"moe_block_s", "MoE block", SecondsText},
       {"exposed_comm_s", "exposed comm", SecondsText},
       {"step_s", "step", SecondsText},
       {"tokens_per_s", "tokens/s",
        [](const report::Cell& cell) { return report::FormatNumber(std::get<double>(cell), 0); }},
       {"gain_vs_no_pipeline", "gain",
        [](const report::Cell& cell) { return report::FormatNumber(std::get<double>(cell), 3); }}});
  for (const EpChunkRow& row : sweep) {
    rows.Add({row.chunks, row.gemm, Seconds(row.dispatch_s), Seconds(row.combine_s),
              Seconds(row.expert_compute_s), Seconds(row.busiest_excess_s),
              Seconds(row.moe_block_s), Seconds(row.exposed_comm_s), Seconds(row.step_s),
              row.tokens_per_s, no_pipeline.step_s / row.step_s});
  }
  return rows;
}

std::string EpResult::Text() const {
  const EpConfig& c = config;
  std::string text = c.model.name + " on " + c.node.name + ": " + ToString(c.workload) + ", EP " +
                     std::to_string(c.ep) + " x TP " + std::to_string(c.tp) + " (attention " +
                     ToString(c.attention) + "), " + std::to_string(replicas) + " replica(s), " +
                     report::FormatNumber(tokens_per_step, 0) + " tokens per step per replica\n";
  text += "cost source: " + cost_source.value("cost_source", std::string("?")) +
          "; collectives: " + collective_cost.value("collective_cost", std::string("?")) + "\n";
  text += "no pipeline: step " + report::FormatSeconds(no_pipeline.step_s) + ", " +
          report::FormatNumber(no_pipeline.tokens_per_s, 0) + " tokens/s\n";
  text += "pipeline N=" + std::to_string(chosen.chunks) + " (" + chunks_chosen_by + "): step " +
          report::FormatSeconds(chosen.step_s) + ", " +
          report::FormatNumber(chosen.tokens_per_s, 0) + " tokens/s, gain " +
          report::FormatNumber(gain_vs_no_pipeline(), 3) + "x\n";
  text += "sweep optimum N=" + std::to_string(optimum.chunks) + "; closed form sqrt(C/k): " +
          (closed_form.optimal_chunks ? "N=" + std::to_string(*closed_form.optimal_chunks)
                                      : std::string("none (no per-chunk overhead)")) +
          "\n";
  if (active_local_experts == 1 && !gemm_crossover_tokens) {
    text += "GroupGemm -> DenseGemm: no crossover (" + gemm_crossover_from +
            ", all DenseGemm; EPS-MoE measured 2048-4096)\n\n";
  } else {
    text +=
        "GroupGemm -> DenseGemm from " +
        (gemm_crossover_tokens ? std::to_string(*gemm_crossover_tokens) : std::string("never")) +
        " tokens per expert (" + gemm_crossover_from + "; EPS-MoE measured 2048-4096)\n\n";
  }
  return text + SweepRows().ToTable();
}

std::string EpResult::TimelineJson() const {
  report::ChromeTrace trace;
  const std::pair<int, const PipelineSchedule*> runs[] = {{1, &chosen_schedule},
                                                          {2, &no_pipeline_schedule}};
  trace.ProcessName(1, "MoE block, pipeline N=" + std::to_string(chosen.chunks));
  trace.ProcessName(2, "MoE block, no pipeline");
  for (const auto& [pid, schedule] : runs) {
    trace.ThreadName(pid, 1, "compute");
    trace.ThreadName(pid, 2, "communication");
    for (const PipelineOp& op : schedule->ops) {
      const std::string name = op.chunk >= 0 ? op.name + " " + std::to_string(op.chunk) : op.name;
      trace.Complete(name, op.name, op.start_s, op.end_s - op.start_s, pid,
                     op.lane == PipelineLane::kCompute ? 1 : 2, 0);
    }
  }
  return trace.Finish();
}

}  // namespace moelab::sim
