#pragma once

#include <cstdint>

#include "executor/executor_config.h"
#include "executor/expert_placement.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "parallel/communicator.h"

namespace moelab::executor {

// `--ep-chunks auto`: EPS-MoE's optimal pipeline count (model/eps_moe.h,
// ExpertPipelineModel::OptimalPipelines) from this job's own measurements, taken once before the
// run on a MoE layer of `tokens` tokens per rank (the most any rank passes: ranks may differ):
//   communication_s: a dispatch-sized and a combine-sized all-to-all(v) (tokens x top_k rows,
//     spread evenly over the ranks), the faster of three;
//   computation_s: this rank's experts' FFNs on their even share of those rows (one expert timed,
//     times the experts the rank holds);
//   overhead_per_pipeline_s (k): one chunk's fixed exchanges (two empty all-to-all(v)s), the
//     fastest of five.
// Each the slowest rank's (all-reduced max), so every rank chooses the same N. Collective.
// Returns N in [1, max(1, tokens)].
int64_t AutoEpChunks(parallel::Communicator& communicator, const ExecutorConfig& config,
                     const ModelWeights& weights, const ExpertPlacement& placement, int64_t tokens,
                     kernels::ThreadPool& pool);

}  // namespace moelab::executor
