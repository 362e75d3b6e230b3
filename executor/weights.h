#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "kernels/bf16.h"
#include "kernels/thread_pool.h"

namespace moelab {

// One FFN (an expert, a dense FFN, or all shared experts fused) as one contiguous block:
// [gate rows | up rows] ([2 * width][hidden]) then down ([hidden][width]). Several shared experts
// fuse exactly into one FFN of the summed width (their outputs add).
struct FfnWeights {
  int64_t hidden = 0;
  int64_t width = 0;
  const Bf16* gate_up() const { return block.data(); }
  const Bf16* down() const { return block.data() + 2 * width * hidden; }
  Bf16* mutable_gate_up() { return block.data(); }
  Bf16* mutable_down() { return block.data() + 2 * width * hidden; }
  std::vector<Bf16> block;

  void Allocate(int64_t hidden_size, int64_t ffn_width);
};

struct LayerWeights {
  std::vector<float> attention_norm;  // [hidden]
  std::vector<float> ffn_norm;        // [hidden]
  std::vector<Bf16> qkv;              // [(heads + 2 kv_heads) head_dim][hidden]: q rows, k rows, v rows
  std::vector<float> qkv_bias;        // empty, or [(heads + 2 kv_heads) head_dim]
  std::vector<float> q_norm, k_norm;  // empty, or [head_dim]
  std::vector<Bf16> output;           // [hidden][heads head_dim]
  std::vector<Bf16> router;           // [experts][hidden]
  std::vector<FfnWeights> experts;    // routed experts
  FfnWeights shared;                  // width 0 when the model has none
  std::vector<Bf16> shared_gate;      // empty, or [1][hidden]
  FfnWeights dense;                   // dense layers only
};

struct ModelWeights {
  ExecutorConfig config;
  std::vector<Bf16> embedding;  // [vocab][hidden]
  std::vector<Bf16> lm_head;    // [vocab][hidden]; empty when tied to the embedding
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
  std::string source;  // "synthetic seed N" or the safetensors path

  const Bf16* lm_head_weights() const { return lm_head.empty() ? embedding.data() : lm_head.data(); }
  // Bytes of every weight (bf16 matrices at 2 bytes, fp32 vectors at 4).
  double TotalBytes() const;
  // Bytes one decode token reads: attention, router, top_k experts per MoE layer, shared and dense
  // FFNs, norms, one embedding row and the LM head.
  double BytesPerToken() const;
};

// Bytes AllocateWeights will take for `config`.
double WeightBytesFor(const ExecutorConfig& config);

// Allocates every tensor for `config`, zero-filled. Refuses (naming both sizes) a model larger
// than the memory this machine has available, rather than failing halfway or swapping.
ModelWeights AllocateWeights(const ExecutorConfig& config);

// Seeded synthetic weights with sensible scales: uniform with standard deviation 1/sqrt(fan_in)
// for projections (output and down projections further by 1/sqrt(2 layers) so the residual
// stream stays O(1)), unit norms, unit-variance embeddings. Deterministic per seed, whatever the
// thread count (each element's value is a hash of seed, tensor and index).
ModelWeights MakeSyntheticWeights(const ExecutorConfig& config, uint64_t seed, ThreadPool& pool);

}  // namespace moelab
