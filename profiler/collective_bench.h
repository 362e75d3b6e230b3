#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/communicator.h"

namespace moelab::profiler {

// The collectives expert parallelism runs, timed on the MPI ranks this process runs among
// (`mpirun -n R moelab profile --collectives`): all-to-all(v) at the message sizes of a MoE layer's
// dispatch and combine, and all-reduce at a layer's activation rows.
//
// Message sizes come from the model's executor shape (hidden, top_k) and the rank count, at each
// of `tokens_per_rank` tokens on every rank, as `executor/expert_parallel.cc` sends them under
// uniform routing: a rank's token picks top_k experts, each on a given peer with probability 1 / R,
// so every peer gets ceil(tokens x top_k / R) rows: dispatch rows of (hidden + 1) fp32 values (the
// expert's id, then the hidden state), combine rows of hidden fp32 values; nothing to itself. An
// all-reduce sums tokens x hidden fp32 values (a layer's rows, as tensor-parallel attention would).
struct CollectivePoint {
  std::string op;       // "all_to_all" | "all_reduce"
  std::string message;  // "dispatch" | "combine" | "rows"
  int64_t tokens_per_rank = 0;
  int64_t rows_per_peer = 0;  // all_to_all: rows each peer gets; all_reduce: 0
  int64_t bytes = 0;  // all_to_all: bytes a rank sends in all (to its R - 1 peers); all_reduce: the
                      // buffer
};

struct CollectiveGridSpec {
  std::vector<int64_t> tokens_per_rank;
  int repetitions = 5;
  double min_time_s = 0.02;  // a repetition times at least this long a run of calls

  static CollectiveGridSpec Quick();  // 1, 4, 16, 64, 256, 1024, 4096 tokens; 5 x >= 20 ms
  static CollectiveGridSpec Full();   // every power of two 1..4096; 9 x >= 100 ms
  void Validate() const;              // errors name the field
};

// The points for a model of `hidden` and `top_k` on `ranks` ranks (>= 2), in grid order: per token
// count, the dispatch, the combine, then the all-reduce. Errors: ranks < 2, hidden or top_k < 1,
// a message above 2^31 bytes per peer (MPI's int counts).
std::vector<CollectivePoint> MakeCollectiveGrid(int64_t hidden, int64_t top_k, int ranks,
                                                const CollectiveGridSpec& spec);

// Times every point on `communicator`'s ranks (a collective call each: every rank calls it with the
// same points). In `spec.repetitions` rounds across the whole grid (a burst of load lands on one
// repetition of many points, as the operator profile's rounds do); each repetition is a barrier,
// then a run of calls long enough for `spec.min_time_s` (the count agreed by the ranks from a
// warm-up call), its seconds per call the slowest rank's (a collective ends when its last rank
// does). Returns the samples (moelab.profile/1, operator all_to_all or all_reduce, device "mpi",
// shape {ranks, bytes}, tokens 1, median/mean/min/max/stddev over the repetitions and each
// repetition's seconds) on every rank. `progress` (may be null) gets a line per point on rank 0.
nlohmann::json MeasureCollectives(parallel::Communicator& communicator,
                                  const std::vector<CollectivePoint>& points,
                                  const CollectiveGridSpec& spec, std::ostream* progress);

}  // namespace moelab::profiler
