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
  int ranks = 0;                            // --expert-parallel R: the ranks mpirun started
  std::string attention = "data-parallel";  // --attention: each rank attends its own sequences
  std::string placement_file;               // --placement FILE; empty: contiguous blocks
  std::string chunks = "1";                 // --ep-chunks N|auto (ParseEpChunks), parsed by every
                                            // rank so that a refusal is agreed and said once
  static constexpr int64_t kAutoChunks = 0;

  // Refuses (naming the option) ranks < 1, a bad --ep-chunks and an attention mode not
  // implemented (tensor-parallel: attention split by heads is not built yet).
  void Validate() const;
};

// `--ep-chunks N|auto`: a whole number in [1, kMaxEpChunks], or "auto" (kAutoChunks).
inline constexpr int64_t kMaxEpChunks = 4096;
int64_t ParseEpChunks(const std::string& text);

// Runs `request` across the ranks of `communicator` with the routed experts spread over them
// (expert_parallel.h) and data-parallel attention: rank r runs sequences [r B / R, (r + 1) B / R)
// of the batch's seeded prompts, so the outputs gathered in rank order are the batch's, greedy
// tokens identical to the one-process run's. Collective: every rank calls it. Before any weight is
// built the ranks agree: each checks the request (workload prefill or decode on the CPU, greedy,
// gate routing, no offload, batch >= ranks, world size = --expert-parallel, a placement holding
// every expert once) and a hash of the build, model, options and placement; any rank's refusal or
// a differing hash raises parallel::AgreedError on every rank. Times are the slowest rank's per
// step; operator and expert-parallel times are this rank's.
RunResult RunExpertParallel(const RunRequest& request, const ExpertParallelOptions& options,
                            const model::PresetStore& presets,
                            parallel::Communicator& communicator);

}  // namespace moelab::executor
