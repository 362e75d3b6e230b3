#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab::sim {

// EPS-MoE's expert pipeline on one device (seed 001, Figure 8b): the MoE input in N chunks, chunk
// i's dispatch all-to-all, its expert GEMMs and its combine all-to-all in that order, on two lanes
// that run at the same time: communication (the all-to-alls, and any collective a chunk needs) and
// compute (the GEMMs). Each lane runs its ops in a fixed order -- compute: the lead op (shared
// experts, which need no dispatch), then G0, G1, ...; communication: D0, D1, C0, D2, C1, ..., so
// the combine of chunk i - 1 and the dispatch of chunk i + 1 run while chunk i computes -- and an
// op starts when its lane is free and the op it needs has finished. N = 1 is the unpipelined layer:
// dispatch, GEMMs, combine one after another.
struct ChunkWork {
  double dispatch_s = 0;
  double compute_s = 0;
  double combine_s = 0;
};

enum class PipelineLane { kCompute, kCommunication };

struct PipelineOp {
  std::string name;  // "shared_experts", "dispatch", "expert_gemm", "combine"
  PipelineLane lane = PipelineLane::kCompute;
  int64_t chunk = -1;  // -1: the lead op
  double start_s = 0;
  double end_s = 0;
};

struct PipelineSchedule {
  std::vector<PipelineOp> ops;
  double makespan_s = 0;
  double compute_busy_s = 0;
  double communication_busy_s = 0;
  // Time the compute lane waits on communication: makespan - compute busy time.
  double exposed_communication_s = 0;
};

// `lead_overlaps_dispatch`: whether the first dispatch may start beside the lead op (the pipeline)
// or only after it (the unpipelined layer, everything in turn). `lanes_share_cores`: the two lanes
// are one (ranks whose communication progresses only on the cores that compute: CPU ranks with
// every core a compute thread, where MPI moves a non-blocking exchange's data inside its own calls
// between GEMMs): the ops run in the pipeline's order, one at a time, so chunking hides nothing
// and each chunk's exchanges add their own latency. Error: no chunk, or a negative duration.
PipelineSchedule SchedulePipeline(const std::vector<ChunkWork>& chunks, double lead_compute_s,
                                  bool lead_overlaps_dispatch = true,
                                  bool lanes_share_cores = false);

}  // namespace moelab::sim
