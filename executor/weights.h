#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "kernels/bf16.h"
#include "kernels/packed_matrix.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace moelab::executor {

// Every matmul weight is packed once at load time in the layout its kernel streams: routed experts
// and attention in the config's format (WeightMatrix: bf16 PackedBf16Matrix, q8_0 or q4_0), the
// router, shared/dense FFNs and LM head as PackedBf16Matrix / bf16; shapes are the Hugging Face
// [out][in] ones.

// One FFN (an expert, a dense FFN, or all shared experts fused): gate_up [gate rows | up rows]
// ([2 * width][hidden], one matmul reads both) and down ([hidden][width]). Several shared experts
// fuse exactly into one FFN of the summed width (their outputs add).
struct FfnWeights {
  int64_t hidden = 0;
  int64_t width = 0;
  kernels::WeightMatrix gate_up;
  kernels::WeightMatrix down;

  void Allocate(int64_t hidden_size, int64_t ffn_width, kernels::WeightFormat format);
  int64_t elements() const { return gate_up.elements() + down.elements(); }
  double StoredBytes() const { return gate_up.StoredBytes() + down.StoredBytes(); }
};

struct LayerWeights {
  std::vector<float> attention_norm;  // [hidden]
  std::vector<float> ffn_norm;        // [hidden]
  kernels::WeightMatrix qkv;    // [(heads + 2 kv_heads) head_dim][hidden]: q rows, k rows, v rows
  std::vector<float> qkv_bias;  // empty, or [(heads + 2 kv_heads) head_dim]
  std::vector<float> q_norm, k_norm;      // empty, or [head_dim]
  kernels::WeightMatrix output;           // [hidden][heads head_dim]
  kernels::PackedBf16Matrix router;       // [experts][hidden]; empty in dense layers
  std::vector<FfnWeights> experts;        // routed experts
  FfnWeights shared;                      // width 0 when the model has none
  kernels::PackedBf16Matrix shared_gate;  // empty, or [1][hidden]
  FfnWeights dense;                       // dense layers only
};

struct ModelWeights {
  ExecutorConfig config;
  std::vector<kernels::Bf16> embedding;  // [vocab][hidden], row-major: the lookup reads one row
  // [vocab][hidden]; with tied embeddings a packed copy of the embedding (TieLmHead), not counted
  // in the weight bytes (the model has one such matrix).
  kernels::PackedBf16Matrix lm_head;
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
  std::string source;  // "synthetic seed N" or the safetensors path

  // Bytes of every weight as stored (bf16 at 2 bytes, quantized with their scales, fp32 vectors at
  // 4).
  double TotalBytes() const;
  // Bytes one decode token reads: attention, router, top_k experts per MoE layer, shared and dense
  // FFNs, norms, one embedding row and the LM head.
  double BytesPerToken() const;
};

// Bytes AllocateWeights will take for `config`.
double WeightBytesFor(const ExecutorConfig& config);

// With tied embeddings, packs the filled embedding into lm_head; loaders call it last.
void TieLmHead(ModelWeights& weights);

// Allocates every tensor for `config`, zero-filled. Refuses (naming both sizes) a model larger
// than the memory this machine has available, rather than failing halfway or swapping.
ModelWeights AllocateWeights(const ExecutorConfig& config);
// Without the routed experts when `with_experts` is false (they live in the expert store).
ModelWeights AllocateWeights(const ExecutorConfig& config, bool with_experts);

// Seeded synthetic weights with sensible scales: uniform with standard deviation 1/sqrt(fan_in)
// for projections (output and down projections further by 1/sqrt(2 layers) so the residual
// stream stays O(1)), unit norms, unit-variance embeddings. Deterministic per seed, whatever the
// thread count (each element's value is a hash of seed, tensor and index).
ModelWeights MakeSyntheticWeights(const ExecutorConfig& config, uint64_t seed,
                                  kernels::ThreadPool& pool);

// The same weights with the routed experts offloaded (the offload runtime's expert store): each
// expert is handed to `*sink` in (MoE layer, expert) order instead of being kept, or skipped when
// `*sink` is empty (the store already holds them); ModelWeights' experts stay empty and the size
// check counts the rest only. `sink == nullptr`: the plain call above.
using ExpertSink =
    std::function<void(int64_t moe_layer, int64_t expert, const FfnWeights& weights)>;
ModelWeights MakeSyntheticWeights(const ExecutorConfig& config, uint64_t seed,
                                  kernels::ThreadPool& pool, const ExpertSink* sink);

}  // namespace moelab::executor
