#include "model/parameter_count.h"

#include <cmath>

namespace moelab {
namespace {

int64_t FfnParams(const MoeModelSpec& spec, int64_t intermediate) {
  const int64_t h = spec.hidden_size;
  const bool gated = spec.activation == Activation::kSwiGlu;
  int64_t params = (gated ? 3 : 2) * h * intermediate;
  if (spec.ffn_bias) params += (gated ? 2 : 1) * intermediate + h;
  return params;
}

int64_t NormParams(const MoeModelSpec& spec, int64_t width) {
  return spec.norm == NormKind::kLayerNorm ? 2 * width : width;
}

int64_t AttentionParams(const MoeModelSpec& spec) {
  const AttentionSpec& a = spec.attention;
  const int64_t h = spec.hidden_size;
  if (a.kind == AttentionKind::kMultiHeadLatent) {
    const int64_t qk_head = a.qk_nope_head_dim + a.qk_rope_head_dim;
    int64_t params = 0;
    if (a.q_lora_rank > 0) {
      params += h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * a.num_heads * qk_head;
    } else {
      params += h * a.num_heads * qk_head;
    }
    params += h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank;
    params += a.kv_lora_rank * a.num_heads * (a.qk_nope_head_dim + a.v_head_dim);
    params += a.num_heads * a.v_head_dim * h;
    return params;
  }
  const int64_t q_width = a.num_heads * a.head_dim;
  const int64_t kv_width = a.num_kv_heads * a.head_dim;
  int64_t params = h * (q_width + 2 * kv_width) + q_width * h;
  if (a.qkv_bias) params += q_width + 2 * kv_width;
  if (a.out_bias) params += h;
  if (a.qk_norm == QkNorm::kPerHead) params += 2 * a.head_dim;
  if (a.qk_norm == QkNorm::kFull) params += q_width + kv_width;
  if (a.attention_sinks) params += a.num_heads;
  return params;
}

double Bytes(int64_t params, double bits) { return static_cast<double>(params) * bits / 8.0; }

}  // namespace

ParameterCounts CountParameters(const MoeModelSpec& spec) {
  ParameterCounts c;
  const int64_t h = spec.hidden_size;
  c.attention_per_layer = AttentionParams(spec);
  c.norms_per_layer = 2 * NormParams(spec, h);
  if (spec.moe) {
    const MoeSpec& moe = *spec.moe;
    c.router_per_moe_layer = h * moe.num_experts;
    if (moe.router_bias) c.router_per_moe_layer += moe.num_experts;
    if (moe.router_score_bias) c.router_per_moe_layer += moe.num_experts;
    c.params_per_expert = FfnParams(spec, moe.expert_intermediate_size);
    c.shared_experts_per_moe_layer =
        moe.num_shared_experts * FfnParams(spec, moe.shared_expert_intermediate_size);
    if (moe.shared_expert_gate) c.shared_experts_per_moe_layer += h;
  }
  if (spec.num_dense_layers() > 0) c.dense_ffn_per_dense_layer = FfnParams(spec, spec.dense_intermediate_size);

  const int64_t embed_dim = spec.embedding_dim();
  c.embeddings = spec.vocab_size * embed_dim;
  if (spec.learned_position_embeddings) {
    c.positions = (spec.max_position_embeddings + spec.position_embedding_offset) * h;
  }
  if (embed_dim != h) c.projections = 2 * embed_dim * h;
  c.lm_head = spec.tied_embeddings ? 0 : spec.vocab_size * embed_dim;
  if (spec.lm_head_bias) c.lm_head += spec.vocab_size;
  c.final_norm = spec.final_norm ? NormParams(spec, h) : 0;

  const int64_t moe_layers = spec.num_moe_layers();
  const int64_t dense_layers = spec.num_dense_layers();
  c.attention = spec.num_layers * c.attention_per_layer;
  c.norms = spec.num_layers * c.norms_per_layer + c.final_norm;
  c.routers = moe_layers * c.router_per_moe_layer;
  c.routed_experts = spec.moe ? moe_layers * spec.moe->num_experts * c.params_per_expert : 0;
  c.shared_experts = moe_layers * c.shared_experts_per_moe_layer;
  c.dense_ffn = dense_layers * c.dense_ffn_per_dense_layer;
  c.total = c.embeddings + c.positions + c.projections + c.lm_head + c.attention + c.norms +
            c.routers + c.routed_experts + c.shared_experts + c.dense_ffn;
  const int64_t unused_experts = spec.moe ? spec.moe->num_experts - spec.moe->top_k : 0;
  c.active = c.total - moe_layers * unused_experts * c.params_per_expert;
  c.active_excluding_input_embedding =
      c.active - (spec.tied_embeddings ? 0 : c.embeddings) - c.positions;
  return c;
}

int64_t ExpertBytes(const MoeModelSpec& spec) {
  return static_cast<int64_t>(
      std::ceil(Bytes(CountParameters(spec).params_per_expert, spec.bits.experts)));
}

WeightBytes CountWeightBytes(const MoeModelSpec& spec) {
  const ParameterCounts c = CountParameters(spec);
  const WeightBits& bits = spec.bits;
  WeightBytes w;
  w.attention = Bytes(c.attention_per_layer + c.norms_per_layer, bits.attention);
  w.router = Bytes(c.router_per_moe_layer, bits.router);
  w.expert = Bytes(c.params_per_expert, bits.experts);
  w.shared_experts = Bytes(c.shared_experts_per_moe_layer, bits.shared_experts);
  w.dense_ffn = Bytes(c.dense_ffn_per_dense_layer, bits.dense_ffn);
  w.embeddings = Bytes(c.embeddings + c.positions + c.projections, bits.embeddings);
  w.lm_head = Bytes(spec.tied_embeddings ? c.embeddings : c.lm_head, bits.embeddings);
  const double moe_layers = static_cast<double>(spec.num_moe_layers());
  const double experts = spec.moe ? static_cast<double>(spec.moe->num_experts) : 0.0;
  w.total = static_cast<double>(spec.num_layers) * w.attention +
            moe_layers * (w.router + experts * w.expert + w.shared_experts) +
            static_cast<double>(spec.num_dense_layers()) * w.dense_ffn + w.embeddings +
            Bytes(c.lm_head, bits.embeddings) + Bytes(c.final_norm, bits.attention);
  return w;
}

int64_t KvCacheBytesPerToken(const MoeModelSpec& spec, double kv_bits) {
  const AttentionSpec& a = spec.attention;
  const int64_t elements_per_layer =
      a.kind == AttentionKind::kMultiHeadLatent ? a.kv_lora_rank + a.qk_rope_head_dim
                                                : 2 * a.num_kv_heads * a.head_dim;
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(elements_per_layer * spec.num_layers) * kv_bits / 8.0));
}

}  // namespace moelab
