#pragma once

#include <cstdint>
#include <string>

#include "executor/run_result.h"
#include "executor/run_workload.h"
#include "model/preset_store.h"
#include "parallel/communicator.h"

namespace moelab::executor {

// `moelab run --expert-parallel R`'s own options.
struct ExpertParallelOptions {
  int ranks = 0;  // --expert-parallel R: the ranks mpirun started
  // --attention: data-parallel (each rank attends its own sequences) or tensor-parallel (every
  // rank attends every sequence over its share of the heads: tensor_parallel_attention.h).
  std::string attention = "data-parallel";
  std::string placement_file;  // --placement FILE; empty: contiguous blocks
  std::string chunks = "1";    // --ep-chunks N|auto (ParseEpChunks), parsed by every
                               // rank so that a refusal is agreed and said once
  // Run the prompts' prefill once, untimed and left out of every reported time, before the
  // measured run: a fresh process's first pass touches every buffer and weight page for the first
  // time (on a 2-vCPU EPYC VM a B=2 x 96 prefill's first MoE layer spent 6.3 ms beside its
  // experts, the later ones 0.15 ms, and the first two layers' expert compute ran 1.2-1.7x the
  // rest), while the profile times warm operators (validate --cases ep sets it).
  bool warm_up_prefill = false;
  static constexpr int64_t kAutoChunks = 0;

  // Refuses (naming the option) ranks < 1, a bad --ep-chunks and an unknown attention mode.
  void Validate() const;
};

// `--ep-chunks N|auto`: a whole number in [1, kMaxEpChunks], or "auto" (kAutoChunks).
inline constexpr int64_t kMaxEpChunks = 4096;
int64_t ParseEpChunks(const std::string& text);

// Runs `request` across the ranks of `communicator` with the routed experts spread over them
// (expert_parallel.h). Data-parallel attention: rank r runs sequences [r B / R, (r + 1) B / R)
// of the batch's seeded prompts, so the outputs gathered in rank order are the batch's, greedy
// tokens identical to the one-process run's. Tensor-parallel attention: every rank runs every
// sequence over its heads (KV heads divisible by R, bf16 attention weights), the outputs are
// rank 0's, and they match the one-process run's except at a near-tie of two logits (the output
// projection's sum is re-associated: tensor_parallel_attention.h). Collective: every rank calls it.
// Before any weight is built the ranks agree: each checks the request (workload prefill or decode
// on the CPU, greedy, gate routing, no offload, batch >= ranks with data-parallel attention, world
// size = --expert-parallel, a placement holding every expert once) and a hash of the build, model,
// options and placement; any rank's refusal or a differing hash raises parallel::AgreedError on
// every rank. Times are the slowest rank's per step; operator and expert-parallel times are this
// rank's.
RunResult RunExpertParallel(const RunRequest& request, const ExpertParallelOptions& options,
                            const model::PresetStore& presets,
                            parallel::Communicator& communicator);

// RunExpertParallel's checks of the request on `world_size` ranks (the refusals above, the
// model's experts over the ranks or the placement, its KV heads with tensor-parallel attention),
// without a weight built or a rank consulted: what a caller planning several runs checks first.
void CheckExpertParallelRun(const RunRequest& request, const ExpertParallelOptions& options,
                            const model::PresetStore& presets, int world_size);

}  // namespace moelab::executor
