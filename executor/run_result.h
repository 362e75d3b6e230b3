#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "device/gpu_devices.h"
#include "executor/executor_config.h"
#include "executor/expert_parallel.h"
#include "executor/forward_model.h"
#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"
#include "routing/routing_trace.h"

namespace moelab::executor {

enum class Workload { kPrefill, kDecode, kBeam, kSpeculative };
std::string ToString(Workload workload);
Workload WorkloadFromString(const std::string& name);  // prefill | decode | beam | sd

// Where a run ran ("machine" in the report).
struct RunMachine {
  std::string cpu;
  std::string isa;
  std::string quantized_kernel;
  int threads = 0;  // the executor's pool
  // --device gpu: the device, and the CUDA runtime and driver it ran under.
  std::optional<device::GpuDevice> gpu;
  std::string cuda_runtime;
  std::string driver;
};

// A model the run built ("model", "draft"): the shape it ran and where its weights came from.
struct RunModel {
  ExecutorConfig config;
  std::string weights_source;
  double weight_bytes = 0;  // every weight, routed experts in the expert store included
};

// --workload sd: the rounds' statistics, and the plain decode of the same requests in the same run
// (the speedup's reference).
struct RunSdStats {
  int64_t gamma = 0;
  Acceptance acceptance = Acceptance::kGreedy;
  int64_t rounds = 0;
  std::vector<int64_t> accepted_histogram;  // [drafts accepted, 0..gamma]: sequence-rounds
  double sigma = 0;
  double speedup = 0;            // the baseline's decode time over SD's
  double target_efficiency = 0;  // a baseline decode step over a full-batch verify pass
  double draft_s = 0;
  double verify_s = 0;
  double baseline_decode_s = 0;
  double baseline_tpot_s = 0;
  OperatorTimes baseline_operator_times;
  OperatorTimes draft_operator_times;
  std::optional<int64_t> reference_mismatches;  // --acceptance alpha
  std::optional<double> alpha;                  // fixed-rate acceptances (alpha, alpha-coin)
  std::optional<double> sigma_expected;         // sigma at that alpha in expectation
};

// What `moelab run` measured, typed; RunResultToJson is its report ("moelab.run/1",
// docs/executor.md) and RunReportText (run_report.h) its text. The library fills it and writes no
// file: the caller saves `trace` (--trace-out) and `timeline_json` (--timeline-out).
struct RunResult {
  Workload workload = Workload::kDecode;
  RunMachine machine;
  std::string device;  // "cpu" | "gpu"
  RunModel model;
  int64_t batch = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  uint64_t seed = 0;
  std::string routing;                // the routing source's description, or "model gate"
  double weight_bytes_per_token = 0;  // routed experts counted as the in-RAM run does
  double ttft_s = 0;
  std::optional<double> tpot_s;        // none with one output token, or for a prefill
  std::optional<double> tokens_per_s;  // prefill: prompt tokens; else later output tokens
  // Decode and SD with more than one output token: the resident weight bytes one decode step
  // reads over its time (meaningful at batch 1).
  std::optional<double> decode_weight_bandwidth_bytes_per_s;
  std::vector<StepTime> step_times;
  std::optional<std::vector<TokenIds>> outputs;  // decode and SD
  std::optional<int64_t> beam_width;             // beam
  std::optional<double> beam_selection_s;        // beam: BeamResult::selection_s
  std::vector<Beam> beams;                       // beam: best first
  std::optional<RunModel> draft;                 // SD
  std::optional<RunSdStats> sd;                  // SD
  OperatorTimes operator_times;                  // the target's (SD: its rounds only)
  // --expert-parallel: the reporting rank's operator times split by pass ("prefill", "decode").
  std::map<std::string, OperatorTimes> operator_times_by_step_kind;
  std::optional<offload::OffloadStats> offload;  // --offload
  // --expert-parallel: the expert-parallel times of rank `expert_parallel_rank` (the reporting
  // one).
  std::optional<ExpertParallelStats> expert_parallel;
  int expert_parallel_rank = 0;
  // The routing the target recorded (MoE models): the report's per-step expert token counts.
  std::optional<routing::RoutingTrace> trace;
  // --timeline-out (RunRequest::record_timeline): what the executor's threads did
  // (ExecutionTimeline::TraceJson, rendered as the run ends, before the offload runtime stops its
  // readers); empty otherwise.
  std::string timeline_json;
};

nlohmann::json RunResultToJson(const RunResult& result);

}  // namespace moelab::executor
