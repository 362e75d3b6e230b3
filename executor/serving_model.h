#pragma once

#include <memory>

#include "executor/forward_model.h"
#include "executor/run_workload.h"
#include "executor/serving_core.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "model/preset_store.h"
#include "scheduler/scheduler_config.h"

namespace moelab::executor {

// A model ready to serve: its thread pool, weights and forward pass, kept together (the forward
// model refers to the other two) and never moved (held by unique_ptr).
struct ServingModel {
  std::unique_ptr<kernels::ThreadPool> pool;
  ModelWeights weights;
  // --offload: the expert store and the offload runtime the model gets its routed experts from
  // (declared before `model`, which refers to them, so they outlive it).
  offload::PreparedStore store;
  std::unique_ptr<offload::OffloadRuntime> offload_runtime;
  std::unique_ptr<ForwardModel> model;
  // Speculative decoding (request.workload sd): the draft's weights and forward pass, gamma and,
  // for --alpha, the fixed-rate acceptance; `speculation` points at `draft`.
  ModelWeights draft_weights;
  std::unique_ptr<ForwardModel> draft;
  ServingSpeculation speculation;
};

// The model `moelab run` would build for `request` (model, shape, weight formats, weights file
// or seeded synthetic weights, threads, --device cpu|gpu), for serving; with workload sd also its
// draft (request.draft, draft_shape, draft_weights; synthetic with seed + 1 as run's), gamma and
// acceptance (greedy, or alpha-coin at request.alpha with the weights' seed: the other
// acceptances are refused by name); with --offload (request.offload) the target's routed experts
// behind the offload runtime as `moelab run --offload` builds it (the store under its folder, the
// policy deciding), whose tokens are bit-identical. Refuses a KV budget (config.kv_blocks x
// kv_block_tokens positions of fp32 keys and values) that with the weights would not fit in 90 %
// of the memory available, naming --kv-blocks.
std::unique_ptr<ServingModel> BuildServingModel(const RunRequest& request,
                                                const scheduler::SchedulerConfig& config,
                                                const model::PresetStore& presets);

// A ServingModel over given weights on the CPU (tests, and the CLI through BuildServingModel).
std::unique_ptr<ServingModel> MakeCpuServingModel(ModelWeights weights, int threads);

// Bytes of fp32 keys and values the budget's positions take for this model.
double KvBudgetBytes(const ExecutorConfig& config, const scheduler::SchedulerConfig& scheduler);

}  // namespace moelab::executor
