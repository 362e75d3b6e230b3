#include "sim/ep_pipeline.h"

#include <algorithm>

#include "base/error.h"

namespace moelab::sim {
namespace {

// Appends an op on `lane` after `lane_free_s` and `ready_s`, returning its end.
double Place(PipelineSchedule& schedule, const std::string& name, PipelineLane lane, int64_t chunk,
             double duration_s, double& lane_free_s, double ready_s) {
  PipelineOp op{name, lane, chunk, std::max(lane_free_s, ready_s), 0};
  op.end_s = op.start_s + duration_s;
  lane_free_s = op.end_s;
  (lane == PipelineLane::kCompute ? schedule.compute_busy_s : schedule.communication_busy_s) +=
      duration_s;
  schedule.ops.push_back(op);
  return op.end_s;
}

}  // namespace

PipelineSchedule SchedulePipeline(const std::vector<ChunkWork>& chunks, double lead_compute_s,
                                  bool lead_overlaps_dispatch, bool lanes_share_cores) {
  if (chunks.empty()) throw base::Error("expert pipeline: at least one chunk expected");
  if (!(lead_compute_s >= 0)) throw base::Error("expert pipeline: negative lead compute time");
  for (const ChunkWork& chunk : chunks) {
    if (!(chunk.dispatch_s >= 0 && chunk.compute_s >= 0 && chunk.combine_s >= 0))
      throw base::Error("expert pipeline: a chunk has a negative duration");
  }
  PipelineSchedule schedule;
  const auto n = static_cast<int64_t>(chunks.size());
  double compute_free = 0, communication_free = 0;
  // One clock for both lanes when they share the cores.
  double& comm_free = lanes_share_cores ? compute_free : communication_free;
  std::vector<double> dispatched(chunks.size()), computed(chunks.size());
  if (lead_compute_s > 0) {
    Place(schedule, "shared_experts", PipelineLane::kCompute, -1, lead_compute_s, compute_free, 0);
    if (!lead_overlaps_dispatch) comm_free = compute_free;
  }
  // The communication lane's order D0, D1, C0, D2, C1, ...: each combine is placed after the
  // dispatch that follows it, and the GEMM it waits for is placed before it.
  auto dispatch = [&](int64_t i) {
    dispatched[i] = Place(schedule, "dispatch", PipelineLane::kCommunication, i,
                          chunks[i].dispatch_s, comm_free, 0);
  };
  auto compute = [&](int64_t i) {
    computed[i] = Place(schedule, "expert_gemm", PipelineLane::kCompute, i, chunks[i].compute_s,
                        compute_free, dispatched[i]);
  };
  auto combine = [&](int64_t i) {
    Place(schedule, "combine", PipelineLane::kCommunication, i, chunks[i].combine_s, comm_free,
          computed[i]);
  };
  dispatch(0);
  compute(0);
  for (int64_t i = 1; i < n; ++i) {
    dispatch(i);
    compute(i);
    combine(i - 1);
  }
  combine(n - 1);
  for (const PipelineOp& op : schedule.ops)
    schedule.makespan_s = std::max(schedule.makespan_s, op.end_s);
  schedule.exposed_communication_s = schedule.makespan_s - schedule.compute_busy_s;
  return schedule;
}

}  // namespace moelab::sim
