#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/limits.h"
#include "executor/executor_config.h"
#include "executor/forward_model.h"
#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"
#include "executor/run_result.h"
#include "kernels/thread_pool.h"
#include "model/preset_store.h"
#include "routing/routing_spec.h"

namespace moelab::executor {

// Everything `moelab run` needs; the CLI fills it, and `moelab validate` (later) will too.
// Threads the executor's pool may be asked for: each is an OS thread, and far more threads than
// cores only adds switching (docs/limits.md).
inline constexpr int kMaxThreads = static_cast<int>(base::kMaxThreads);  // base/limits.h

struct RunRequest {
  std::string model = "mixtral-8x7b";
  model::ShapeOverrides shape;  // applied to the model's spec
  int expert_bits = 16;         // routed experts: 16 bf16, 8 q8_0, 4 q4_0 (--expert-bits)
  int attention_bits = 16;      // q|k|v and o projections, the same choices (--attention-bits)
  std::string weights;          // safetensors file/folder; empty: synthetic
  std::string draft = "llama-3.2-1b";
  model::ShapeOverrides draft_shape;  // draft vocab defaults to the target's (shared vocabulary)
  std::string draft_weights;
  Workload workload = Workload::kDecode;
  int64_t batch = 1;
  int64_t prompt_tokens = 32;
  int64_t output_tokens = 32;
  int64_t beam_width = 4;
  int64_t gamma = 4;
  Acceptance acceptance = Acceptance::kTargetAlpha;
  double alpha = 0.8;
  double temperature = 0;  // decode sampling; 0 greedy (rejection sampling uses 1 when 0)
  routing::RoutingSpec routing =
      routing::ParseRoutingSpec("gate");  // --routing, parsed once by the caller
  uint64_t seed = 1;
  int threads = 0;  // 0: DefaultThreadCount()
  // --trace-out: the caller saves RunResult::trace, so a dense model (it routes nothing) is
  // refused.
  bool trace_requested = false;
  // --timeline-out: record the execution timeline (ExecutionTimeline: the compute thread's
  // operators and waits, the expert reads) into RunResult::timeline_json; --device cpu only.
  bool record_timeline = false;
  // --offload POLICY: routed experts on storage (the expert store under offload->offload_dir), a
  // RAM expert cache of offload->expert_memory_bytes driven by the policy (executor/offload/);
  // the report gains "offload" (OffloadStats::ToJson).
  std::optional<offload::OffloadOptions> offload;
  // --device cpu|gpu: where the forward passes run (gpu: the CUDA backend, executor/gpu/, on GPU
  // gpu_index); the report gains "device" and machine.gpu.
  std::string device = "cpu";
  int gpu_index = 0;

  void Validate() const;
};

// The target's shape in the weight formats asked for, checked against the model's positions, this
// machine's memory and (--device gpu) the device before any weight is built.
ExecutorConfig RunTargetConfig(const RunRequest& request, const model::PresetStore& presets);
// Where the run runs: CPU, ISA, the pool's threads and (--device gpu) the GPU.
RunMachine RunMachineOf(const RunRequest& request, const kernels::ThreadPool& pool);

// The target's weights as `moelab run` loads them: with --offload on the CPU without the routed
// experts, which go to (or already are in) the expert store `store` names.
ModelWeights LoadRunWeights(const ExecutorConfig& config, const RunRequest& request,
                            kernels::ThreadPool& pool, offload::PreparedStore& store);
// The target's forward pass as `moelab run` builds it over `weights` (which it refers to): with
// --offload its offload runtime (returned in `runtime`, which must outlive the model) as the
// expert provider, on the CPU or the GPU.
std::unique_ptr<ForwardModel> BuildRunModel(const RunRequest& request, const ExecutorConfig& config,
                                            const ModelWeights& weights,
                                            const offload::PreparedStore& store,
                                            kernels::ThreadPool& pool,
                                            std::unique_ptr<offload::OffloadRuntime>& runtime);

// Runs the workload and returns what it measured (RunResultToJson: the report "moelab.run/1",
// docs/executor.md). Writes no file.
RunResult RunWorkload(const RunRequest& request, const model::PresetStore& presets);

}  // namespace moelab::executor
