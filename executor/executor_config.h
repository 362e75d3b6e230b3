#pragma once

#include <cstdint>
#include <string>

#include "kernels/weight_matrix.h"
#include "model/executor_shape.h"
#include "model/model_spec.h"

namespace moelab::executor {

// The shape the reference executor runs: a decoder-only transformer with RMSNorm, rotary
// embeddings, grouped-query attention and SwiGLU FFNs — MoE (Mixtral, Qwen-MoE style: softmax
// top-K router, optional shared experts) or dense (Llama, Qwen2: the draft models). Its integer
// shape is model/executor_shape.h's (ExecutorShape); the numerics and weight formats are its own.
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
  int64_t max_positions =
      4096;  // rotary table and KV cache limit, at most model::kMaxExecutorPositions
  // Storage of routed experts and of attention (q|k|v, o): bf16, q8_0 or q4_0 (`--expert-bits`,
  // `--attention-bits`). Router, shared/dense FFNs, embeddings and LM head stay bf16.
  kernels::WeightFormat expert_format = kernels::WeightFormat::kBf16;
  kernels::WeightFormat attention_format = kernels::WeightFormat::kBf16;

  bool is_moe() const { return num_experts > 0; }
  bool IsMoeLayer(int64_t layer) const { return is_moe() && layer >= first_dense_layers; }
  int64_t q_width() const { return num_heads * head_dim; }
  int64_t kv_width() const { return num_kv_heads * head_dim; }

  // Throws moelab::Error naming the field (model::ValidateExecutorShape of its shape).
  void Validate() const;
};

// The executor's configuration for `spec` with `overrides` (model::ExecutorShape, which refuses
// architectures the executor does not implement by name), bf16 weights and default numerics.
ExecutorConfig ExecutorConfigFromSpec(const model::MoeModelSpec& spec,
                                      const model::ShapeOverrides& overrides);

// The spec the executor's shape corresponds to, with the stored bits of its weight formats (for
// the analytic model and weight byte counts).
model::MoeModelSpec SpecFromExecutorConfig(const ExecutorConfig& config);

}  // namespace moelab::executor
