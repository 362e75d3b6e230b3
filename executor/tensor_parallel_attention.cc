#include "executor/tensor_parallel_attention.h"

#include <chrono>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/weight_matrix.h"

namespace moelab::executor {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Rows [begin, begin + count) of `from`, as bf16, appended to `rows`.
void AppendRows(const kernels::WeightMatrix& from, int64_t begin, int64_t count,
                std::vector<kernels::Bf16>& rows) {
  const size_t at = rows.size();
  rows.resize(at + static_cast<size_t>(count * from.cols()));
  from.UnpackRows(begin, count, rows.data() + at);
}

}  // namespace

TensorParallelAttention::TensorParallelAttention(parallel::Communicator& communicator)
    : communicator_(communicator) {}

void TensorParallelAttention::ReduceScatterAdd(const float* partials, int64_t tokens, int64_t width,
                                               float* residual) {
  const auto start = std::chrono::steady_clock::now();
  const int ranks = communicator_.size();
  const TokenShare share = ShareOf(tokens);
  const int64_t mine = (share.end - share.begin) * width;  // floats of this rank's share
  const int64_t row_bytes = width * static_cast<int64_t>(sizeof(float));
  std::vector<int64_t> send_bytes(ranks), send_offsets(ranks), recv_bytes(ranks),
      recv_offsets(ranks);
  for (int r = 0; r < ranks; ++r) {
    const int64_t begin = tokens * r / ranks;
    const int64_t end = tokens * (r + 1) / ranks;
    send_bytes[r] = (end - begin) * row_bytes;  // rank r's share of this rank's partials
    send_offsets[r] = begin * row_bytes;
    recv_bytes[r] = mine * static_cast<int64_t>(sizeof(float));  // rank r's partials of mine
    recv_offsets[r] = r * recv_bytes[r];
  }
  received_.resize(static_cast<size_t>(mine * ranks));
  communicator_
      .StartAllToAllV(partials, send_bytes, send_offsets, received_.data(), recv_bytes,
                      recv_offsets)
      ->Wait();
  // sum = rank 0's + rank 1's + ...: the same order on whichever rank owns the token.
  float* rows = residual + share.begin * width;
  for (int64_t i = 0; i < mine; ++i) {
    float sum = received_[static_cast<size_t>(i)];
    for (int r = 1; r < ranks; ++r) sum += received_[static_cast<size_t>(r * mine + i)];
    rows[i] += sum;
  }
  attention_reduce_s_ += SecondsSince(start);
}

TensorParallelAttention::TokenShare TensorParallelAttention::ShareOf(int64_t tokens) const {
  const int64_t rank = communicator_.rank();
  const int64_t ranks = communicator_.size();
  return {tokens * rank / ranks, tokens * (rank + 1) / ranks};
}

void TensorParallelAttention::GatherRows(float* rows, int64_t tokens, int64_t width) {
  const auto start = std::chrono::steady_clock::now();
  const TokenShare share = ShareOf(tokens);
  const std::vector<std::string> shares = communicator_.AllGatherBytes(
      std::string(reinterpret_cast<const char*>(rows + share.begin * width),
                  static_cast<size_t>((share.end - share.begin) * width) * sizeof(float)));
  for (int r = 0; r < communicator_.size(); ++r) {
    const int64_t begin = tokens * r / communicator_.size();
    const int64_t end = tokens * (r + 1) / communicator_.size();
    if (shares[r].size() != static_cast<size_t>((end - begin) * width) * sizeof(float))
      throw base::Error("tensor-parallel attention: a rank's MoE rows have another size");
    std::memcpy(rows + begin * width, shares[r].data(), shares[r].size());
  }
  moe_gather_s_ += SecondsSince(start);
}

void TensorParallelAttention::GatherColumns(float* values, int64_t rows, int64_t columns) {
  const auto start = std::chrono::steady_clock::now();
  const int ranks = communicator_.size();
  const TokenShare share = ShareOf(columns);
  const int64_t width = share.end - share.begin;
  std::vector<float> mine(static_cast<size_t>(rows * width));
  for (int64_t row = 0; row < rows; ++row) {
    std::memcpy(mine.data() + row * width, values + row * columns + share.begin,
                static_cast<size_t>(width) * sizeof(float));
  }
  const std::vector<std::string> blocks = communicator_.AllGatherBytes(
      std::string(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(float)));
  for (int r = 0; r < ranks; ++r) {
    const int64_t begin = columns * r / ranks;
    const int64_t cols = columns * (r + 1) / ranks - begin;
    if (blocks[r].size() != static_cast<size_t>(rows * cols) * sizeof(float))
      throw base::Error("tensor-parallel attention: a rank's logits have another size");
    const float* block = reinterpret_cast<const float*>(blocks[r].data());
    for (int64_t row = 0; row < rows; ++row) {
      std::memcpy(values + row * columns + begin, block + row * cols,
                  static_cast<size_t>(cols) * sizeof(float));
    }
  }
  logits_gather_s_ += SecondsSince(start);
}

void KeepTensorParallelShareOfRank(ModelWeights& weights, int rank, int ranks) {
  ExecutorConfig& c = weights.config;
  if (ranks < 1 || rank < 0 || rank >= ranks)
    throw base::Error("tensor-parallel attention: rank " + std::to_string(rank) + " of " +
                      std::to_string(ranks));
  if (c.num_kv_heads % ranks != 0) {
    throw base::Error("--attention tensor-parallel splits the KV heads over the ranks: " +
                      std::to_string(c.num_kv_heads) + " KV heads do not divide by " +
                      std::to_string(ranks) + " ranks (give --kv-heads a multiple of " +
                      std::to_string(ranks) + ")");
  }
  if (c.attention_format != kernels::WeightFormat::kBf16) {
    throw base::Error(
        "--attention tensor-parallel runs bf16 attention weights (--attention-bits 16): "
        "quantized blocks split by heads would be dequantized and quantized again");
  }
  const int64_t hd = c.head_dim;
  const int64_t d = c.hidden_size;
  const int64_t heads = c.num_heads / ranks;
  const int64_t kv_heads = c.num_kv_heads / ranks;
  const int64_t first_head = rank * heads;
  const int64_t first_kv = rank * kv_heads;
  const int64_t q_rows = c.num_heads * hd;
  const int64_t kv_rows = c.num_kv_heads * hd;
  // q rows, k rows, v rows of this rank's heads, in the one-process layout's order.
  const int64_t begins[3] = {first_head * hd, q_rows + first_kv * hd,
                             q_rows + kv_rows + first_kv * hd};
  const int64_t counts[3] = {heads * hd, kv_heads * hd, kv_heads * hd};
  for (LayerWeights& layer : weights.layers) {
    std::vector<kernels::Bf16> rows;
    std::vector<float> bias;
    for (int part = 0; part < 3; ++part) {
      AppendRows(layer.qkv, begins[part], counts[part], rows);
      if (!layer.qkv_bias.empty()) {
        bias.insert(bias.end(), layer.qkv_bias.begin() + begins[part],
                    layer.qkv_bias.begin() + begins[part] + counts[part]);
      }
    }
    const int64_t local_rows = counts[0] + counts[1] + counts[2];
    kernels::WeightMatrix qkv(c.attention_format, local_rows, d);
    qkv.PackRows(0, local_rows, rows.data());
    layer.qkv = std::move(qkv);
    layer.qkv_bias = std::move(bias);

    // The output projection [hidden][heads hd]: the columns this rank's heads produce.
    std::vector<kernels::Bf16> all(static_cast<size_t>(d * q_rows));
    layer.output.UnpackRows(0, d, all.data());
    std::vector<kernels::Bf16> mine(static_cast<size_t>(d * counts[0]));
    for (int64_t row = 0; row < d; ++row) {
      std::memcpy(mine.data() + row * counts[0], all.data() + row * q_rows + begins[0],
                  static_cast<size_t>(counts[0]) * sizeof(kernels::Bf16));
    }
    kernels::WeightMatrix output(c.attention_format, d, counts[0]);
    output.PackRows(0, d, mine.data());
    layer.output = std::move(output);
  }
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  // The LM head's rows of this rank's vocabulary share (a tied LM head is a packed copy too).
  const int64_t vocab_begin = c.vocab_size * rank / ranks;
  const int64_t vocab_rows = c.vocab_size * (rank + 1) / ranks - vocab_begin;
  std::vector<kernels::Bf16> lm_rows(static_cast<size_t>(vocab_rows * d));
  weights.lm_head.UnpackRows(vocab_begin, vocab_rows, lm_rows.data());
  weights.lm_head = kernels::PackedBf16Matrix::Pack(lm_rows.data(), vocab_rows, d);
}

}  // namespace moelab::executor
