#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/expert_placement.h"
#include "executor/weights.h"
#include "kernels/expert_ffn.h"
#include "kernels/thread_pool.h"
#include "parallel/communicator.h"

namespace moelab::executor {

// One MoE layer's expert-parallel times on this rank, summed over the run's passes (seconds).
//   dispatch_s: from a chunk's row counts being sent to its rows having arrived (all-to-all(v)
//     in flight, overlapped or not), summed over chunks;
//   combine_s: the same for the expert outputs coming back;
//   expert_compute_s: this rank's expert FFNs on the rows it received (gather, GEMMs, scatter);
//   exposed_comm_s: the time the compute thread spent blocked on those exchanges, the part of
//     dispatch + combine the pipeline did not hide;
//   other_s: the rest of the layer's MoE block on the compute thread: planning the chunks,
//     packing the rows to send, starting the exchanges, the weighted combine of the outputs.
struct ExpertParallelLayerTimes {
  double dispatch_s = 0;
  double combine_s = 0;
  double expert_compute_s = 0;
  double exposed_comm_s = 0;
  double other_s = 0;
};

struct ExpertParallelStats {
  int ranks = 1;
  int64_t chunks = 1;
  bool chunks_auto = false;  // --ep-chunks auto chose `chunks`
  std::string attention = "data-parallel";
  // Tensor-parallel attention (tensor_parallel_attention.h): seconds summing the partial output
  // projections over the ranks and gathering the MoE outputs back, summed over layers and passes.
  double attention_reduce_s = 0;
  double moe_gather_s = 0;
  double logits_gather_s = 0;           // the vocabulary-parallel LM head's logits gathered
  std::vector<int32_t> rank_of_expert;  // the placement
  std::vector<ExpertParallelLayerTimes> layers;  // [MoE layer]
  // The same times summed over the MoE layers, per kind of pass ("prefill", "decode", ...: the
  // ForwardOptions::step_kind the pass ran with), so a decode run's steps can be told from its
  // prefill (validate --cases ep compares them with sim ep's terms).
  std::map<std::string, ExpertParallelLayerTimes> by_step_kind;
  int64_t rows_sent = 0;      // (token, expert) rows dispatched by this rank
  int64_t rows_received = 0;  // rows this rank's experts computed
  // Expert FFN calls (one per expert and chunk it had rows in): split by expert, a layer's N
  // chunks call each active expert once while N is at most the rank's active experts.
  int64_t expert_ffn_calls = 0;
  ExpertParallelLayerTimes Total() const;
};

// The routed experts of every MoE layer spread over the ranks of `communicator` by `placement`
// (EPS-MoE's expert parallelism): each rank routes its own tokens, sends every (token, expert) row
// to the expert's rank with an all-to-all(v), runs the experts it holds on the rows it received,
// and gets the outputs back with a second all-to-all(v). With `chunks` N > 1 the layer's tokens go
// in N chunks whose exchanges (non-blocking, driven by MPI_Test between expert GEMMs) overlap the
// previous chunk's expert GEMMs: EPS-MoE's pipeline, split by expert as EPS-MoE splits it (a chunk
// is a group of each rank's active experts, so no expert's weights are read twice; a split by
// tokens read an expert once per chunk it was active in, 3-4 ms a layer at decode). A token's
// result is the sum of its experts' outputs weighted and added in ascending expert order, as the
// one-process loop adds them, and an expert's output row depends only on its input row, so the
// result is bit-identical to the one-process run's.
class ExpertParallel {
 public:
  ExpertParallel(parallel::Communicator& communicator, ExpertPlacement placement, int64_t chunks,
                 int64_t hidden, int64_t moe_layers, kernels::ThreadPool& pool);
  ~ExpertParallel();

  // out[tokens][hidden] = for each token, sum over its experts (ascending id) of weight * FFN(x).
  // `layer_experts` holds this rank's experts (others may be empty). Collective: every rank calls
  // it for the same layer in the same order, with its own tokens (zero allowed).
  void RunLayer(int64_t moe_layer, const float* x, int64_t tokens,
                const std::vector<std::vector<int32_t>>& experts,
                const std::vector<std::vector<float>>& weights,
                const std::vector<FfnWeights>& layer_experts, float* out);

  const ExpertParallelStats& stats() const { return stats_; }
  ExpertParallelStats& stats() { return stats_; }
  // Zeroes the measured times and counts (after a warm-up pass), keeping what describes the run.
  void ResetMeasurements();
  // The kind of the passes that follow (ForwardOptions::step_kind), for stats().by_step_kind.
  void set_step_kind(const std::string& step_kind) { step_kind_ = step_kind; }
  const ExpertPlacement& placement() const { return placement_; }

 private:
  struct Chunk;
  using Clock = std::chrono::steady_clock;

  // Gathers every rank's rows per expert and assigns each expert (or share of its rows) a chunk:
  // each rank's active experts in N contiguous groups, or, with N above their count, each
  // expert's rows split over N / active chunks. Sets each chunk's recv_rows.
  void PlanChunks(const std::vector<std::vector<int32_t>>& experts);
  // The chunk of the `row`-th row (over all ranks, in rank then token order) of `expert`.
  int64_t ChunkOf(int32_t expert, int64_t row) const;
  void PackChunks(const float* x, const std::vector<std::vector<int32_t>>& experts);
  void StartDispatch(Chunk& chunk);
  void ComputeExperts(Chunk& chunk, const std::vector<FfnWeights>& layer_experts,
                      Chunk* in_flight_dispatch, Chunk* in_flight_combine);
  void StartCombine(Chunk& chunk);
  // Blocks on a chunk's exchange, counting the wait as exposed communication.
  void WaitFor(parallel::PendingCollective& pending, double& exposed_s);
  // Drives a chunk's exchanges in flight and notes when they finish.
  void Progress(Chunk* chunk);
  void Accumulate(const std::vector<std::vector<int32_t>>& experts,
                  const std::vector<std::vector<float>>& weights, float* out);

  parallel::Communicator& communicator_;
  ExpertPlacement placement_;
  int64_t chunks_;
  int64_t hidden_;
  kernels::ThreadPool& pool_;
  ExpertParallelStats stats_;
  ExpertParallelLayerTimes* layer_ = nullptr;  // the layer being run
  std::string step_kind_ = "decode";
  std::vector<std::unique_ptr<Chunk>> chunk_state_;  // reused across layers
  // The layer's plan: per expert, its rows over all ranks, this rank's first row among them, its
  // first chunk and the chunks its rows span; per (token, slot), its chunk and row there.
  std::vector<int64_t> expert_rows_, my_first_row_, first_chunk_, chunk_span_;
  std::vector<int64_t> slot_chunk_, slot_row_;
  std::vector<float> gathered_, expert_out_;
  kernels::ExpertFfnScratch ffn_scratch_;
};

// `moelab run`'s "expert_parallel" object: ranks, chunks, dispatch_s, combine_s, exposed_comm_s,
// expert_compute_s (totals over layers and passes), the placement and per-layer times, as measured
// on `rank`.
nlohmann::json ExpertParallelStatsToJson(const ExpertParallelStats& stats, int rank);

}  // namespace moelab::executor
