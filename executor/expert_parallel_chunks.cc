#include "executor/expert_parallel_chunks.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <limits>
#include <vector>

#include "kernels/expert_ffn.h"
#include "model/eps_moe.h"

namespace moelab::executor {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The fastest of `repeats` all-to-all(v)s of `bytes_per_peer` bytes to every rank.
double TimeAllToAllV(parallel::Communicator& communicator, int64_t bytes_per_peer, int repeats) {
  const size_t ranks = static_cast<size_t>(communicator.size());
  std::vector<int64_t> bytes(ranks, bytes_per_peer), offsets(ranks);
  for (size_t r = 0; r < ranks; ++r) offsets[r] = static_cast<int64_t>(r) * bytes_per_peer;
  std::vector<char> send(static_cast<size_t>(bytes_per_peer) * ranks, 1);
  std::vector<char> recv(send.size());
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    communicator.Barrier();
    const Clock::time_point start = Clock::now();
    communicator.StartAllToAllV(send.data(), bytes, offsets, recv.data(), bytes, offsets)->Wait();
    best = std::min(best, Since(start));
  }
  return best;
}

// One chunk's fixed exchanges: two empty all-to-all(v)s (the row counts go once a layer).
double TimeChunkOverhead(parallel::Communicator& communicator) {
  const size_t ranks = static_cast<size_t>(communicator.size());
  std::vector<int64_t> zero(ranks, 0);
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < 5; ++i) {
    communicator.Barrier();
    const Clock::time_point start = Clock::now();
    for (int exchange = 0; exchange < 2; ++exchange)
      communicator.StartAllToAllV(nullptr, zero, zero, nullptr, zero, zero)->Wait();
    best = std::min(best, Since(start));
  }
  return best;
}

// This rank's experts on `rows` rows shared evenly among them.
double TimeExperts(const ExecutorConfig& config, const ModelWeights& weights,
                   const ExpertPlacement& placement, int rank, int64_t rows,
                   kernels::ThreadPool& pool) {
  const std::vector<int32_t> mine = placement.ExpertsOf(rank);
  if (mine.empty() || rows < 1) return 0;
  const int64_t per_expert = std::max<int64_t>(1, rows / static_cast<int64_t>(mine.size()));
  const int64_t d = config.hidden_size;
  const FfnWeights& ffn = weights.layers[config.first_dense_layers].experts[mine.front()];
  std::vector<float> x(static_cast<size_t>(per_expert * d), 0.5f), out(x.size());
  kernels::ExpertFfnScratch scratch;
  kernels::ExpertFfn(x.data(), per_expert, ffn.gate_up, ffn.down, out.data(), pool, scratch);
  const Clock::time_point start = Clock::now();
  kernels::ExpertFfn(x.data(), per_expert, ffn.gate_up, ffn.down, out.data(), pool, scratch);
  return Since(start) * static_cast<double>(mine.size());
}

}  // namespace

int64_t AutoEpChunks(parallel::Communicator& communicator, const ExecutorConfig& config,
                     const ModelWeights& weights, const ExpertPlacement& placement, int64_t tokens,
                     kernels::ThreadPool& pool) {
  const int64_t ranks = communicator.size();
  // Every rank measures the same exchange and picks the same N: the busiest rank's tokens (with
  // data-parallel attention an uneven batch gives the ranks different counts, and all-to-all(v)s
  // of different sizes failed in MPI as "message truncated").
  double busiest_tokens = static_cast<double>(tokens);
  communicator.AllReduceMax(&busiest_tokens, 1);
  tokens = static_cast<int64_t>(busiest_tokens);
  const int64_t rows = tokens * config.top_k;
  const int64_t row_bytes = config.hidden_size * static_cast<int64_t>(sizeof(float));
  const int64_t rows_per_peer = (rows + ranks - 1) / ranks;
  std::array<double, 3> measured = {
      TimeAllToAllV(communicator, rows_per_peer * (row_bytes + 4), 3) +
          TimeAllToAllV(communicator, rows_per_peer * row_bytes, 3),
      TimeExperts(config, weights, placement, communicator.rank(), rows, pool),
      TimeChunkOverhead(communicator)};
  communicator.AllReduceMax(measured.data(), static_cast<int64_t>(measured.size()));
  model::ExpertPipelineModel pipeline;
  pipeline.communication_s = measured[0];
  pipeline.computation_s = measured[1];
  // A measured overhead of zero would make every N optimal; a clock tick stands in.
  pipeline.overhead_per_pipeline_s = std::max(measured[2], 1e-9);
  return std::clamp<int64_t>(pipeline.OptimalPipelines(), 1, std::max<int64_t>(1, tokens));
}

}  // namespace moelab::executor
