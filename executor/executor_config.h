#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/weight_matrix.h"
#include "model/model_spec.h"

namespace moelab::executor {

// The rotary table and every thread's attention scores are sized by max_positions before a token
// runs (--max-positions 9e18 ended in "internal error"); 2^20 is above every preset's context
// window.
inline constexpr int64_t kMaxExecutorPositions = int64_t{1} << 20;

// The shape the reference executor runs: a decoder-only transformer with RMSNorm, rotary
// embeddings, grouped-query attention and SwiGLU FFNs — MoE (Mixtral, Qwen-MoE style: softmax
// top-K router, optional shared experts) or dense (Llama, Qwen2: the draft models).
struct ExecutorConfig {
  std::string name;
  std::string family;
  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  bool tied_embeddings = false;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;
  bool qk_norm = false;  // per-head RMSNorm on q and k (Qwen3)
  int64_t sliding_window = 0;
  // MoE (num_experts == 0: dense model).
  int64_t num_experts = 0;
  int64_t top_k = 0;
  int64_t expert_intermediate_size = 0;
  int64_t num_shared_experts = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool shared_expert_gate = false;
  bool norm_topk_prob = true;
  int64_t first_dense_layers = 0;
  int64_t dense_intermediate_size = 0;
  // Numerics not in the performance spec.
  double rope_theta = 1.0e6;
  float rms_norm_eps = 1e-5f;
  int64_t max_positions = 4096;  // rotary table and KV cache limit, at most kMaxExecutorPositions
  // Storage of routed experts and of attention (q|k|v, o): bf16, q8_0 or q4_0 (`--expert-bits`,
  // `--attention-bits`). Router, shared/dense FFNs, embeddings and LM head stay bf16.
  kernels::WeightFormat expert_format = kernels::WeightFormat::kBf16;
  kernels::WeightFormat attention_format = kernels::WeightFormat::kBf16;

  bool is_moe() const { return num_experts > 0; }
  bool IsMoeLayer(int64_t layer) const { return is_moe() && layer >= first_dense_layers; }
  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }

  void Validate() const;  // throws moelab::Error naming the field
};

// Command-line shape overrides (--layers, --hidden, ...); unset fields keep the spec's value.
struct ShapeOverrides {
  std::optional<int64_t> layers, hidden, intermediate, dense_intermediate, experts, top_k, heads,
      kv_heads, head_dim, vocab, shared_experts, shared_intermediate, max_positions;
};

// Builds the executor's shape from a model spec, applying overrides. Architectures the executor
// does not implement (MLA, LayerNorm, ReLU/GELU FFNs, FFN biases, attention sinks, alternating
// windows) are refused by name.
ExecutorConfig ExecutorConfigFromSpec(const model::MoeModelSpec& spec,
                                      const ShapeOverrides& overrides);

// The spec the executor's shape corresponds to (for the analytic model and weight byte counts).
model::MoeModelSpec SpecFromExecutorConfig(const ExecutorConfig& config);

// `spec` scaled by `overrides` through the executor's shape, so it is exactly what `moelab run`
// with the same overrides executes (architectures it cannot run are refused by name); `spec`
// itself when no override is set.
model::MoeModelSpec ScaledSpec(const model::MoeModelSpec& spec, const ShapeOverrides& overrides);

}  // namespace moelab::executor
