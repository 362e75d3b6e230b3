#include "executor/executor_config.h"

namespace moelab::executor {
namespace {

// The executor's shape as a spec, unvalidated, bf16 weights.
model::MoeModelSpec ShapeOf(const ExecutorConfig& c) {
  model::MoeModelSpec spec;
  spec.name = c.name;
  spec.display_name = c.name;
  spec.family = c.family;
  spec.num_layers = c.num_layers;
  spec.hidden_size = c.hidden_size;
  spec.vocab_size = c.vocab_size;
  spec.tied_embeddings = c.tied_embeddings;
  spec.max_position_embeddings = c.max_positions;
  spec.attention.num_heads = c.num_heads;
  spec.attention.num_kv_heads = c.num_kv_heads;
  spec.attention.head_dim = c.head_dim;
  spec.attention.qkv_bias = c.qkv_bias;
  spec.attention.qk_norm = c.qk_norm ? model::QkNorm::kPerHead : model::QkNorm::kNone;
  spec.attention.sliding_window = c.sliding_window;
  spec.dense_intermediate_size = c.dense_intermediate_size;
  if (c.is_moe()) {
    model::MoeSpec moe;
    moe.num_experts = c.num_experts;
    moe.top_k = c.top_k;
    moe.expert_intermediate_size = c.expert_intermediate_size;
    moe.num_shared_experts = c.num_shared_experts;
    moe.shared_expert_intermediate_size = c.shared_expert_intermediate_size;
    moe.shared_expert_gate = c.shared_expert_gate;
    moe.first_dense_layers = c.first_dense_layers;
    moe.norm_topk_prob = c.norm_topk_prob;
    spec.moe = moe;
  }
  return spec;
}

}  // namespace

void ExecutorConfig::Validate() const { model::ValidateExecutorShape(ShapeOf(*this)); }

ExecutorConfig ExecutorConfigFromSpec(const model::MoeModelSpec& spec,
                                      const model::ShapeOverrides& overrides) {
  const model::MoeModelSpec shape = model::ExecutorShape(spec, overrides);
  ExecutorConfig c;
  c.name = shape.name;
  c.family = shape.family;
  c.num_layers = shape.num_layers;
  c.hidden_size = shape.hidden_size;
  c.vocab_size = shape.vocab_size;
  c.tied_embeddings = shape.tied_embeddings;
  c.num_heads = shape.attention.num_heads;
  c.num_kv_heads = shape.attention.num_kv_heads;
  c.head_dim = shape.attention.head_dim;
  c.qkv_bias = shape.attention.qkv_bias;
  c.qk_norm = shape.attention.qk_norm == model::QkNorm::kPerHead;
  c.sliding_window = shape.attention.sliding_window;
  if (shape.moe) {
    c.num_experts = shape.moe->num_experts;
    c.top_k = shape.moe->top_k;
    c.expert_intermediate_size = shape.moe->expert_intermediate_size;
    c.num_shared_experts = shape.moe->num_shared_experts;
    c.shared_expert_intermediate_size = shape.moe->shared_expert_intermediate_size;
    c.shared_expert_gate = shape.moe->shared_expert_gate;
    c.norm_topk_prob = shape.moe->norm_topk_prob;
    c.first_dense_layers = shape.moe->first_dense_layers;
  }
  c.dense_intermediate_size = shape.dense_intermediate_size;
  c.max_positions = shape.max_position_embeddings;
  return c;
}

model::MoeModelSpec SpecFromExecutorConfig(const ExecutorConfig& c) {
  model::MoeModelSpec spec = ShapeOf(c);
  // Stored bits per weight including block scales (8.5 for q8_0, 4.5 for q4_0), so the planner,
  // the simulator and the profile count the bytes this executor streams.
  spec.bits.experts = kernels::StoredBitsPerWeight(c.expert_format);
  spec.bits.attention = kernels::StoredBitsPerWeight(c.attention_format);
  model::ValidateModelSpec(spec, "executor shape of '" + c.name + "'");
  return spec;
}

}  // namespace moelab::executor
