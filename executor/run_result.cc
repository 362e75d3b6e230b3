#include "executor/run_result.h"

#include "base/error.h"

namespace moelab::executor {
namespace {

nlohmann::json Nullable(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json MachineJson(const RunMachine& m) {
  nlohmann::json json = {{"cpu", m.cpu},
                         {"isa", m.isa},
                         {"quantized_kernel", m.quantized_kernel},
                         {"threads", m.threads}};
  if (m.gpu) {
    json["gpu"] = {{"index", m.gpu->index},
                   {"name", m.gpu->name},
                   {"memory_bytes", m.gpu->memory_bytes},
                   {"compute_capability", std::to_string(m.gpu->compute_capability_major) + "." +
                                              std::to_string(m.gpu->compute_capability_minor)},
                   {"cuda_runtime", m.cuda_runtime},
                   {"driver", m.driver}};
  }
  return json;
}

nlohmann::json ModelJson(const RunModel& model) {
  const ExecutorConfig& c = model.config;
  nlohmann::json json = {{"name", c.name},
                         {"family", c.family},
                         {"layers", c.num_layers},
                         {"hidden", c.hidden_size},
                         {"heads", c.num_heads},
                         {"kv_heads", c.num_kv_heads},
                         {"head_dim", c.head_dim},
                         {"vocab", c.vocab_size},
                         {"weights_source", model.weights_source},
                         {"weight_bytes", model.weight_bytes},
                         {"expert_format", ToString(c.expert_format)},
                         {"attention_format", ToString(c.attention_format)}};
  if (c.is_moe()) {
    json["experts"] = c.num_experts;
    json["top_k"] = c.top_k;
    json["expert_intermediate"] = c.expert_intermediate_size;
    json["expert_bytes"] =
        3.0 * static_cast<double>(c.hidden_size * c.expert_intermediate_size) * 2.0;
    json["shared_experts"] = c.num_shared_experts;
  } else {
    json["intermediate"] = c.dense_intermediate_size;
  }
  return json;
}

nlohmann::json StepsJson(const std::vector<StepTime>& steps) {
  nlohmann::json json = nlohmann::json::array();
  for (const StepTime& s : steps)
    json.push_back({{"kind", s.kind},
                    {"tokens", s.tokens},
                    {"positions", s.positions},
                    {"seconds", s.seconds}});
  return json;
}

nlohmann::json OperatorJson(const OperatorTimes& t) {
  return {{"attention", t.attention_s}, {"router", t.router_s}, {"experts", t.experts_s},
          {"lm_head", t.lm_head_s},     {"other", t.other_s},   {"total", t.total()}};
}

nlohmann::json SdJson(const RunSdStats& sd) {
  nlohmann::json json = {{"gamma", sd.gamma},
                         {"acceptance", ToString(sd.acceptance)},
                         {"rounds", sd.rounds},
                         {"accepted_histogram", sd.accepted_histogram},
                         {"sigma", sd.sigma},
                         {"speedup", sd.speedup},
                         {"target_efficiency", sd.target_efficiency},
                         {"draft_s", sd.draft_s},
                         {"verify_s", sd.verify_s},
                         {"baseline",
                          {{"decode_s", sd.baseline_decode_s},
                           {"tpot_s", sd.baseline_tpot_s},
                           {"operator_times_s", OperatorJson(sd.baseline_operator_times)}}},
                         {"draft_operator_times_s", OperatorJson(sd.draft_operator_times)}};
  if (sd.reference_mismatches) json["reference_mismatches"] = *sd.reference_mismatches;
  if (sd.alpha) json["alpha"] = *sd.alpha;
  if (sd.sigma_expected) json["sigma_expected"] = *sd.sigma_expected;
  return json;
}

// The workload's own figures: timings, steps, and what it produced.
void AddWorkloadJson(const RunResult& r, nlohmann::json& json) {
  json["ttft_s"] = r.ttft_s;
  json["tpot_s"] = Nullable(r.tpot_s);
  json["tokens_per_s"] = Nullable(r.tokens_per_s);
  if (r.decode_weight_bandwidth_bytes_per_s)
    json["decode_weight_bandwidth_bytes_per_s"] = *r.decode_weight_bandwidth_bytes_per_s;
  json["step_times"] = StepsJson(r.step_times);
  if (r.outputs) json["outputs"] = *r.outputs;
  if (r.beam_width) {
    json["beam_width"] = *r.beam_width;
    json["beam_selection_s"] = Nullable(r.beam_selection_s);
    nlohmann::json beams = nlohmann::json::array();
    for (const Beam& b : r.beams)
      beams.push_back({{"tokens", b.tokens}, {"log_probability", b.log_probability}});
    json["beams"] = beams;
  }
  if (r.draft) json["draft"] = ModelJson(*r.draft);
  if (r.sd) json["sd"] = SdJson(*r.sd);
}

}  // namespace

std::string ToString(Workload workload) {
  switch (workload) {
    case Workload::kPrefill:
      return "prefill";
    case Workload::kDecode:
      return "decode";
    case Workload::kBeam:
      return "beam";
    case Workload::kSpeculative:
      return "sd";
  }
  return "?";
}

Workload WorkloadFromString(const std::string& name) {
  if (name == "prefill") return Workload::kPrefill;
  if (name == "decode") return Workload::kDecode;
  if (name == "beam") return Workload::kBeam;
  if (name == "sd") return Workload::kSpeculative;
  throw base::Error("unknown workload '" + name + "': expected prefill, decode, beam or sd");
}

nlohmann::json RunResultToJson(const RunResult& r) {
  nlohmann::json json;
  json["schema"] = "moelab.run/1";
  json["workload"] = ToString(r.workload);
  json["machine"] = MachineJson(r.machine);
  json["device"] = r.device;
  json["model"] = ModelJson(r.model);
  json["batch"] = r.batch;
  json["prompt_tokens"] = r.prompt_tokens;
  json["output_tokens"] = r.output_tokens;
  json["seed"] = r.seed;
  json["routing"] = r.routing;
  json["weight_bytes_per_token"] = r.weight_bytes_per_token;
  AddWorkloadJson(r, json);
  json["operator_times_s"] = OperatorJson(r.operator_times);
  if (!r.operator_times_by_step_kind.empty()) {
    nlohmann::json by_kind = nlohmann::json::object();
    for (const auto& [kind, times] : r.operator_times_by_step_kind)
      by_kind[kind] = OperatorJson(times);
    json["operator_times_by_step_kind_s"] = by_kind;
  }
  if (r.offload) json["offload"] = r.offload->ToJson();
  if (r.expert_parallel)
    json["expert_parallel"] = ExpertParallelStatsToJson(*r.expert_parallel, r.expert_parallel_rank);
  if (r.trace) {
    nlohmann::json counts = nlohmann::json::array();
    for (size_t step = 0; step < r.trace->steps.size(); ++step)
      counts.push_back(r.trace->ExpertCounts(step));
    json["expert_token_counts"] = counts;
  }
  return json;
}

}  // namespace moelab::executor
