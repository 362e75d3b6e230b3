#pragma once

#include <cstdint>
#include <vector>

#include "executor/weights.h"
#include "parallel/communicator.h"

namespace moelab::executor {

// `moelab run --expert-parallel R --attention tensor-parallel`: attention split by heads over the
// R ranks (Megatron's split: rank r holds query heads [r H / R, (r + 1) H / R) and their KV heads,
// the rows of q|k|v that produce them and the columns of the output projection that read them),
// the rest of the model replicated. Every rank runs every sequence's attention over its heads,
// which gives a partial output projection of every token; the partials are reduce-scattered
// (ReduceScatterAdd: each rank gets the sum of its 1/R share of the tokens, TokenShare, and adds
// it to its rows of the residual stream), the rank runs the layer's norm and MoE block (expert
// parallel, as with data-parallel attention) on its share only, and the residual stream is
// all-gathered (GatherRows) for the next layer's attention: EPS-MoE's TP + EP, the communication
// sim ep prices for it (a reduce-scatter and an all-gather of the hidden states a layer), and each
// (token, expert) row computed once.
//
// Not bit-identical to the one-process run: there the output projection sums all H heads'
// columns in one dot product per output; here each rank sums its H / R heads' and the R partials
// are added, in rank order, by the rank that owns the token, so all ranks hold bit-identical
// hidden states after each gather (and emit the same tokens), and the difference from one process
// is a float32 re-association (relative 1e-7 per output), which a greedy token follows only at a
// near-tie of two logits.
class TensorParallelAttention {
 public:
  explicit TensorParallelAttention(parallel::Communicator& communicator);

  // partials[tokens][width]: this rank's partial output projection of every token. Adds the sum
  // over ranks of the partials of this rank's share of the tokens (added in rank order) into
  // residual[tokens][width]'s rows of that share; the other rows are left for GatherRows.
  void ReduceScatterAdd(const float* partials, int64_t tokens, int64_t width, float* residual);

  // This rank's share [begin, end) of a pass's `tokens` rows for the MoE block.
  struct TokenShare {
    int64_t begin = 0, end = 0;
  };
  TokenShare ShareOf(int64_t tokens) const;
  // rows[tokens][width]: each rank's share (ShareOf) filled by that rank; on return every rank
  // holds all of them.
  void GatherRows(float* rows, int64_t tokens, int64_t width);
  // values[rows][columns]: each rank's share of the columns (ShareOf(columns)) filled by that
  // rank (the vocabulary-parallel LM head's logits); on return every rank holds all of them.
  void GatherColumns(float* values, int64_t rows, int64_t columns);

  // Seconds this rank spent in ReduceScatterAdd, GatherRows and GatherColumns.
  double attention_reduce_s() const { return attention_reduce_s_; }
  double moe_gather_s() const { return moe_gather_s_; }
  double logits_gather_s() const { return logits_gather_s_; }

 private:
  parallel::Communicator& communicator_;
  double attention_reduce_s_ = 0;
  double moe_gather_s_ = 0;
  double logits_gather_s_ = 0;
  std::vector<float> received_;  // ReduceScatterAdd's: every rank's partials of this rank's share
};

// The weights of rank `rank` of `ranks` under TensorParallelAttention: q|k|v rows (and bias) of
// its heads, the output projection's columns of its heads (config.num_heads and num_kv_heads
// divided by `ranks`), and the LM head's rows of its share of the vocabulary (ShareOf's split;
// config.vocab_size stays the model's: the embedding is whole, the logits are gathered), as
// Megatron shards them and sim ep prices them (every operator 1/R per rank). Refuses
// (moelab::Error) a KV head count `ranks` does not divide and quantized attention weights (their
// blocks would be dequantized and packed again: other weights than the one-process run's).
void KeepTensorParallelShareOfRank(ModelWeights& weights, int rank, int ranks);

}  // namespace moelab::executor
