#include "executor/expert_parallel.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "base/error.h"
#include "kernels/elementwise.h"

namespace moelab::executor {

// One chunk of a layer's rows on its way to the experts and back: on every rank a group of its
// active experts (EPS-MoE's split by expert, so no expert's weights are read twice), or, with more
// chunks than active experts, a share of one expert's rows. A dispatched row is the expert's id
// (its bits in the first float) followed by the token's hidden state; a combined row is the
// expert's output. Rows go to each rank in (token, slot) order and come back in that order.
struct ExpertParallel::Chunk {
  std::vector<int64_t> send_rows, recv_rows;  // per rank
  std::vector<int64_t> send_bytes, send_offsets, recv_bytes, recv_offsets;
  std::vector<float> send, recv, back_send, back_recv;
  std::unique_ptr<parallel::PendingCollective> dispatch, combine;
  Clock::time_point dispatch_start, combine_start;
  bool dispatch_done = false, combine_done = false;
};

namespace {

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

// Bytes and byte offsets of `rows` rows of `row_floats` floats per rank.
void ByteLayout(const std::vector<int64_t>& rows, int64_t row_floats, std::vector<int64_t>& bytes,
                std::vector<int64_t>& offsets) {
  bytes.resize(rows.size());
  offsets.resize(rows.size());
  int64_t at = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    bytes[r] = rows[r] * row_floats * static_cast<int64_t>(sizeof(float));
    offsets[r] = at;
    at += bytes[r];
  }
}

int64_t Sum(const std::vector<int64_t>& values) {
  int64_t sum = 0;
  for (int64_t v : values) sum += v;
  return sum;
}

}  // namespace

ExpertParallelLayerTimes ExpertParallelStats::Total() const {
  ExpertParallelLayerTimes total;
  for (const ExpertParallelLayerTimes& l : layers) {
    total.dispatch_s += l.dispatch_s;
    total.combine_s += l.combine_s;
    total.expert_compute_s += l.expert_compute_s;
    total.exposed_comm_s += l.exposed_comm_s;
    total.other_s += l.other_s;
  }
  return total;
}

ExpertParallel::ExpertParallel(parallel::Communicator& communicator, ExpertPlacement placement,
                               int64_t chunks, int64_t hidden, int64_t moe_layers,
                               kernels::ThreadPool& pool)
    : communicator_(communicator),
      placement_(std::move(placement)),
      chunks_(chunks),
      hidden_(hidden),
      pool_(pool) {
  if (placement_.ranks != communicator.size()) {
    throw base::Error("expert placement over " + std::to_string(placement_.ranks) +
                      " ranks, but the job has " + std::to_string(communicator.size()));
  }
  if (chunks < 1) throw base::Error("--ep-chunks must be at least 1");
  stats_.ranks = communicator.size();
  stats_.chunks = chunks;
  stats_.rank_of_expert = placement_.rank_of_expert;
  stats_.layers.resize(static_cast<size_t>(moe_layers));
  for (int64_t c = 0; c < chunks; ++c) chunk_state_.push_back(std::make_unique<Chunk>());
}

ExpertParallel::~ExpertParallel() = default;

void ExpertParallel::PlanChunks(const std::vector<std::vector<int32_t>>& experts) {
  const int ranks = communicator_.size();
  const int me = communicator_.rank();
  const int64_t num_experts = placement_.num_experts();
  // Every rank's rows per expert, so that each rank splits every rank's experts alike.
  std::vector<int64_t> mine(static_cast<size_t>(num_experts), 0);
  for (const std::vector<int32_t>& slots : experts)
    for (int32_t e : slots) ++mine[static_cast<size_t>(e)];
  const Clock::time_point start = Clock::now();
  const std::vector<std::string> gathered = communicator_.AllGatherBytes(
      std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(int64_t)));
  const double waited_s = Seconds(Clock::now() - start);
  layer_->dispatch_s += waited_s;
  layer_->exposed_comm_s += waited_s;
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(ranks));  // [rank][expert]
  for (int r = 0; r < ranks; ++r) {
    if (gathered[r].size() != mine.size() * sizeof(int64_t))
      throw base::Error("expert parallelism: rank " + std::to_string(r) +
                        " sent row counts for another expert count");
    rows[r].resize(mine.size());
    std::memcpy(rows[r].data(), gathered[r].data(), gathered[r].size());
  }
  expert_rows_.assign(mine.size(), 0);
  my_first_row_.assign(mine.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    for (size_t e = 0; e < mine.size(); ++e) {
      if (r < me) my_first_row_[e] += rows[r][e];
      expert_rows_[e] += rows[r][e];
    }
  }
  // Each rank's active experts in N groups (N <= active), or each spread over N / active chunks.
  const int64_t n = chunks_;
  first_chunk_.assign(mine.size(), 0);
  chunk_span_.assign(mine.size(), 0);
  for (int r = 0; r < ranks; ++r) {
    std::vector<int32_t> active;
    for (int32_t e : placement_.ExpertsOf(r))
      if (expert_rows_[e] > 0) active.push_back(e);
    std::sort(active.begin(), active.end());
    const auto a = static_cast<int64_t>(active.size());
    for (int64_t p = 0; p < a; ++p) {
      const size_t e = static_cast<size_t>(active[p]);
      if (n <= a) {
        int64_t c = 0;
        while (a * (c + 1) / n <= p) ++c;
        first_chunk_[e] = c;
        chunk_span_[e] = 1;
      } else {
        first_chunk_[e] = n * p / a;
        chunk_span_[e] = n * (p + 1) / a - first_chunk_[e];
      }
    }
  }
  // The rows this rank's experts receive, per chunk and sender.
  for (int64_t c = 0; c < n; ++c) chunk_state_[c]->recv_rows.assign(ranks, 0);
  for (int32_t e : placement_.ExpertsOf(me)) {
    const size_t ue = static_cast<size_t>(e);
    int64_t from = 0;
    for (int s = 0; s < ranks; ++s) {
      const int64_t to = from + rows[s][ue];
      for (int64_t j = 0; j < chunk_span_[ue]; ++j) {
        const int64_t lo = expert_rows_[ue] * j / chunk_span_[ue];
        const int64_t hi = expert_rows_[ue] * (j + 1) / chunk_span_[ue];
        chunk_state_[first_chunk_[ue] + j]->recv_rows[s] +=
            std::max<int64_t>(0, std::min(to, hi) - std::max(from, lo));
      }
      from = to;
    }
  }
}

int64_t ExpertParallel::ChunkOf(int32_t expert, int64_t row) const {
  const size_t e = static_cast<size_t>(expert);
  int64_t j = 0;
  while (j + 1 < chunk_span_[e] && row >= expert_rows_[e] * (j + 1) / chunk_span_[e]) ++j;
  return first_chunk_[e] + j;
}

void ExpertParallel::PackChunks(const float* x, const std::vector<std::vector<int32_t>>& experts) {
  const size_t ranks = static_cast<size_t>(communicator_.size());
  const int64_t d = hidden_;
  const auto tokens = static_cast<int64_t>(experts.size());
  const int64_t k = tokens > 0 ? static_cast<int64_t>(experts[0].size()) : 0;
  slot_chunk_.resize(static_cast<size_t>(tokens * k));
  slot_row_.resize(slot_chunk_.size());
  for (std::unique_ptr<Chunk>& chunk : chunk_state_) chunk->send_rows.assign(ranks, 0);
  // This rank's rows of an expert, in token order, follow the lower ranks' rows of it.
  std::vector<int64_t> seen(my_first_row_);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = experts[t][j];
      const int64_t c = ChunkOf(e, seen[static_cast<size_t>(e)]++);
      slot_chunk_[t * k + j] = c;
      ++chunk_state_[c]->send_rows[placement_.rank_of_expert[e]];
    }
  }
  std::vector<std::vector<int64_t>> next_row(chunk_state_.size(), std::vector<int64_t>(ranks, 0));
  for (size_t c = 0; c < chunk_state_.size(); ++c) {
    Chunk& chunk = *chunk_state_[c];
    for (size_t r = 1; r < ranks; ++r) next_row[c][r] = next_row[c][r - 1] + chunk.send_rows[r - 1];
    const int64_t rows = Sum(chunk.send_rows);
    chunk.send.resize(static_cast<size_t>(rows * (d + 1)));
    stats_.rows_sent += rows;
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = experts[t][j];
      const int64_t c = slot_chunk_[t * k + j];
      const int64_t row = next_row[c][placement_.rank_of_expert[e]]++;
      slot_row_[t * k + j] = row;
      float* out = chunk_state_[c]->send.data() + row * (d + 1);
      std::memcpy(out, &e, sizeof(float));
      std::copy_n(x + t * d, d, out + 1);
    }
  }
}

void ExpertParallel::StartDispatch(Chunk& chunk) {
  const int64_t row_floats = hidden_ + 1;
  ByteLayout(chunk.send_rows, row_floats, chunk.send_bytes, chunk.send_offsets);
  ByteLayout(chunk.recv_rows, row_floats, chunk.recv_bytes, chunk.recv_offsets);
  chunk.recv.resize(static_cast<size_t>(Sum(chunk.recv_rows) * row_floats));
  chunk.dispatch_start = Clock::now();
  chunk.dispatch =
      communicator_.StartAllToAllV(chunk.send.data(), chunk.send_bytes, chunk.send_offsets,
                                   chunk.recv.data(), chunk.recv_bytes, chunk.recv_offsets);
}

void ExpertParallel::ComputeExperts(Chunk& chunk, const std::vector<FfnWeights>& layer_experts,
                                    Chunk* in_flight_dispatch, Chunk* in_flight_combine) {
  const Clock::time_point start = Clock::now();
  const int64_t d = hidden_;
  const int64_t rows = Sum(chunk.recv_rows);
  chunk.back_send.resize(static_cast<size_t>(rows * d));
  // The received rows of each expert, in arrival order (rank, then the sender's token order).
  std::vector<std::vector<int64_t>> rows_of(static_cast<size_t>(placement_.num_experts()));
  for (int64_t row = 0; row < rows; ++row) {
    int32_t e = 0;
    std::memcpy(&e, chunk.recv.data() + row * (d + 1), sizeof(float));
    if (e < 0 || e >= placement_.num_experts() ||
        placement_.rank_of_expert[e] != communicator_.rank())
      throw base::Error("expert parallelism: rank " + std::to_string(communicator_.rank()) +
                        " received a row for expert " + std::to_string(e) + " it does not hold");
    rows_of[static_cast<size_t>(e)].push_back(row);
  }
  for (size_t e = 0; e < rows_of.size(); ++e) {
    const std::vector<int64_t>& mine = rows_of[e];
    if (mine.empty()) continue;
    const int64_t count = static_cast<int64_t>(mine.size());
    gathered_.resize(static_cast<size_t>(count * d));
    expert_out_.resize(gathered_.size());
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(chunk.recv.data() + mine[i] * (d + 1) + 1, d, gathered_.data() + i * d);
    const FfnWeights& ffn = layer_experts[e];
    kernels::ExpertFfn(gathered_.data(), count, ffn.gate_up, ffn.down, expert_out_.data(), pool_,
                       ffn_scratch_);
    ++stats_.expert_ffn_calls;
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(expert_out_.data() + i * d, d, chunk.back_send.data() + mine[i] * d);
    // Between GEMMs the neighbours' exchanges move on (MPI progresses a non-blocking collective
    // only inside MPI calls).
    Progress(in_flight_dispatch);
    Progress(in_flight_combine);
  }
  stats_.rows_received += rows;
  layer_->expert_compute_s += Seconds(Clock::now() - start);
}

void ExpertParallel::StartCombine(Chunk& chunk) {
  // Back the way the rows came: what this rank received it returns, what it sent it gets back.
  std::vector<int64_t> back_bytes, back_offsets, home_bytes, home_offsets;
  ByteLayout(chunk.recv_rows, hidden_, back_bytes, back_offsets);
  ByteLayout(chunk.send_rows, hidden_, home_bytes, home_offsets);
  chunk.back_recv.resize(static_cast<size_t>(Sum(chunk.send_rows) * hidden_));
  chunk.combine_start = Clock::now();
  chunk.combine = communicator_.StartAllToAllV(chunk.back_send.data(), back_bytes, back_offsets,
                                               chunk.back_recv.data(), home_bytes, home_offsets);
}

void ExpertParallel::WaitFor(parallel::PendingCollective& pending, double& exposed_s) {
  const Clock::time_point start = Clock::now();
  pending.Wait();
  exposed_s += Seconds(Clock::now() - start);
}

void ExpertParallel::Progress(Chunk* chunk) {
  if (chunk == nullptr) return;
  if (chunk->dispatch && !chunk->dispatch_done && chunk->dispatch->Test()) {
    chunk->dispatch_done = true;
    layer_->dispatch_s += Seconds(Clock::now() - chunk->dispatch_start);
  }
  if (chunk->combine && !chunk->combine_done && chunk->combine->Test()) {
    chunk->combine_done = true;
    layer_->combine_s += Seconds(Clock::now() - chunk->combine_start);
  }
}

void ExpertParallel::Accumulate(const std::vector<std::vector<int32_t>>& experts,
                                const std::vector<std::vector<float>>& weights, float* out) {
  const int64_t d = hidden_;
  std::vector<int64_t> order;
  for (int64_t t = 0; t < static_cast<int64_t>(experts.size()); ++t) {
    const int64_t k = static_cast<int64_t>(experts[t].size());
    order.resize(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) order[j] = j;
    // Ascending expert id: the order the one-process loop adds a token's experts in.
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return experts[t][a] < experts[t][b]; });
    float* row = out + t * d;
    std::fill(row, row + d, 0.0f);
    for (int64_t j : order) {
      const Chunk& chunk = *chunk_state_[slot_chunk_[t * k + j]];
      kernels::Axpy(weights[t][j], chunk.back_recv.data() + slot_row_[t * k + j] * d, d, row);
    }
  }
}

void ExpertParallel::ResetMeasurements() {
  std::fill(stats_.layers.begin(), stats_.layers.end(), ExpertParallelLayerTimes{});
  stats_.by_step_kind.clear();
  stats_.rows_sent = stats_.rows_received = stats_.expert_ffn_calls = 0;
}

void ExpertParallel::RunLayer(int64_t moe_layer, const float* x, int64_t tokens,
                              const std::vector<std::vector<int32_t>>& experts,
                              const std::vector<std::vector<float>>& weights,
                              const std::vector<FfnWeights>& layer_experts, float* out) {
  if (moe_layer < 0 || moe_layer >= static_cast<int64_t>(stats_.layers.size()))
    throw base::Error("expert parallelism: MoE layer " + std::to_string(moe_layer) + " unknown");
  if (static_cast<int64_t>(experts.size()) != tokens)
    throw base::Error("expert parallelism: " + std::to_string(experts.size()) + " tokens routed, " +
                      std::to_string(tokens) + " expected");
  layer_ = &stats_.layers[static_cast<size_t>(moe_layer)];
  const ExpertParallelLayerTimes before = *layer_;
  const Clock::time_point layer_start = Clock::now();
  const int64_t n = chunks_;
  for (std::unique_ptr<Chunk>& chunk : chunk_state_) {
    chunk->dispatch.reset();
    chunk->combine.reset();
    chunk->dispatch_done = chunk->combine_done = false;
  }
  PlanChunks(experts);
  PackChunks(x, experts);
  StartDispatch(*chunk_state_[0]);
  // EPS-MoE's pipeline: chunk c + 1's dispatch and chunk c - 1's combine run while chunk c's
  // experts compute.
  for (int64_t c = 0; c < n; ++c) {
    Chunk& chunk = *chunk_state_[c];
    WaitFor(*chunk.dispatch, layer_->exposed_comm_s);
    Progress(&chunk);
    Chunk* next = c + 1 < n ? chunk_state_[c + 1].get() : nullptr;
    if (next) StartDispatch(*next);
    ComputeExperts(chunk, layer_experts, next, c > 0 ? chunk_state_[c - 1].get() : nullptr);
    StartCombine(chunk);
  }
  for (int64_t c = 0; c < n; ++c) {
    Chunk& chunk = *chunk_state_[c];
    WaitFor(*chunk.combine, layer_->exposed_comm_s);
    Progress(&chunk);
  }
  Accumulate(experts, weights, out);
  layer_->other_s += Seconds(Clock::now() - layer_start) -
                     (layer_->expert_compute_s - before.expert_compute_s) -
                     (layer_->exposed_comm_s - before.exposed_comm_s);
  ExpertParallelLayerTimes& kind = stats_.by_step_kind[step_kind_];
  kind.dispatch_s += layer_->dispatch_s - before.dispatch_s;
  kind.combine_s += layer_->combine_s - before.combine_s;
  kind.expert_compute_s += layer_->expert_compute_s - before.expert_compute_s;
  kind.exposed_comm_s += layer_->exposed_comm_s - before.exposed_comm_s;
  kind.other_s += layer_->other_s - before.other_s;
}

nlohmann::json ExpertParallelStatsToJson(const ExpertParallelStats& stats, int rank) {
  const ExpertParallelLayerTimes total = stats.Total();
  nlohmann::json by_step_kind = nlohmann::json::object();
  for (const auto& [kind, t] : stats.by_step_kind) {
    by_step_kind[kind] = {{"dispatch_s", t.dispatch_s},
                          {"combine_s", t.combine_s},
                          {"expert_compute_s", t.expert_compute_s},
                          {"exposed_comm_s", t.exposed_comm_s},
                          {"other_s", t.other_s}};
  }
  nlohmann::json layers = nlohmann::json::array();
  for (size_t l = 0; l < stats.layers.size(); ++l) {
    const ExpertParallelLayerTimes& t = stats.layers[l];
    layers.push_back({{"moe_layer", l},
                      {"dispatch_s", t.dispatch_s},
                      {"combine_s", t.combine_s},
                      {"expert_compute_s", t.expert_compute_s},
                      {"exposed_comm_s", t.exposed_comm_s},
                      {"other_s", t.other_s}});
  }
  return {{"ranks", stats.ranks},
          {"chunks", stats.chunks},
          {"chunks_auto", stats.chunks_auto},
          {"attention", stats.attention},
          {"attention_reduce_s", stats.attention_reduce_s},
          {"moe_gather_s", stats.moe_gather_s},
          {"logits_gather_s", stats.logits_gather_s},
          {"placement", stats.rank_of_expert},
          {"measured_on_rank", rank},
          {"dispatch_s", total.dispatch_s},
          {"combine_s", total.combine_s},
          {"expert_compute_s", total.expert_compute_s},
          {"exposed_comm_s", total.exposed_comm_s},
          {"other_s", total.other_s},
          {"rows_sent", stats.rows_sent},
          {"rows_received", stats.rows_received},
          {"expert_ffn_calls", stats.expert_ffn_calls},
          {"by_step_kind", by_step_kind},
          {"layers", layers}};
}

}  // namespace moelab::executor
