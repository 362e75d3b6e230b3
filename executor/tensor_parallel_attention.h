#pragma once

#include <cstdint>
#include <vector>

#include "executor/weights.h"
#include "parallel/communicator.h"

namespace moelab::executor {

// `moelab run --expert-parallel R --attention tensor-parallel`: attention split by heads over the
// R ranks (Megatron's split: rank r holds query heads [r H / R, (r + 1) H / R) and their KV heads,
// the rows of q|k|v that produce them and the columns of the output projection that read them),
// the rest of the model replicated. Every rank runs every sequence: its attention gives a partial
// output projection over its heads, and the R partials are summed (SumPartials) before the
// residual add. The MoE block, expert-parallel as with data-parallel attention, takes each rank's
// 1/R share of the pass's tokens (TokenShare) and the outputs are gathered back to every rank
// (GatherRows), so each (token, expert) row is computed once and every rank continues with the
// whole batch.
//
// Not bit-identical to the one-process run: there the output projection sums all H heads'
// columns in one dot product per output; here each rank sums its H / R heads' and the R partials
// are added. The sum is taken in rank order on every rank from the same gathered bytes, so all
// ranks hold bit-identical hidden states (and emit the same tokens), and the difference from one
// process is a float32 re-association (relative 1e-7 per output), which a greedy token follows
// only at a near-tie of two logits.
class TensorParallelAttention {
 public:
  explicit TensorParallelAttention(parallel::Communicator& communicator);

  // values[0..count) = the sum over ranks of each rank's values, added in rank order.
  void SumPartials(float* values, int64_t count);

  // This rank's share [begin, end) of a pass's `tokens` rows for the MoE block.
  struct TokenShare {
    int64_t begin = 0, end = 0;
  };
  TokenShare ShareOf(int64_t tokens) const;
  // rows[tokens][width]: each rank's share (ShareOf) filled by that rank; on return every rank
  // holds all of them.
  void GatherRows(float* rows, int64_t tokens, int64_t width);

  // Seconds this rank spent in SumPartials and GatherRows, and their calls.
  double attention_reduce_s() const { return attention_reduce_s_; }
  double moe_gather_s() const { return moe_gather_s_; }

 private:
  parallel::Communicator& communicator_;
  double attention_reduce_s_ = 0;
  double moe_gather_s_ = 0;
};

// The attention weights of rank `rank` of `ranks` under TensorParallelAttention: q|k|v rows (and
// bias) of its heads, the output projection's columns of its heads, config.num_heads and
// num_kv_heads divided by `ranks`. Refuses (moelab::Error) a KV head count `ranks` does not divide
// and quantized attention weights (their blocks would be dequantized and packed again: other
// weights than the one-process run's).
void KeepAttentionHeadsOfRank(ModelWeights& weights, int rank, int ranks);

}  // namespace moelab::executor
