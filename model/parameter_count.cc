#include "model/parameter_count.h"

#include <cmath>
#include <string>

#include "base/checked.h"
#include "base/error.h"

namespace moelab::model {
namespace {

// Every count below is exact int64 arithmetic; a model whose counts overflow (e.g. --layers
// 9223372036854775807) is refused by CountParameters instead of printing a negative count.
using Count = base::CheckedCount;

Count FfnParams(const MoeModelSpec& spec, int64_t intermediate) {
  const Count h = spec.hidden_size;
  const bool gated = spec.activation == Activation::kSwiGlu;
  Count params = Count(gated ? 3 : 2) * h * intermediate;
  if (spec.ffn_bias) params += Count(gated ? 2 : 1) * intermediate + h;
  return params;
}

Count NormParams(const MoeModelSpec& spec, int64_t width) {
  return spec.norm == NormKind::kLayerNorm ? Count(2) * width : Count(width);
}

Count AttentionParams(const MoeModelSpec& spec) {
  const AttentionSpec& a = spec.attention;
  const Count h = spec.hidden_size;
  if (a.kind == AttentionKind::kMultiHeadLatent) {
    const Count qk_head = Count(a.qk_nope_head_dim) + a.qk_rope_head_dim;
    Count params = 0;
    if (a.q_lora_rank > 0) {
      params += h * a.q_lora_rank + a.q_lora_rank + Count(a.q_lora_rank) * a.num_heads * qk_head;
    } else {
      params += h * a.num_heads * qk_head;
    }
    params += h * (Count(a.kv_lora_rank) + a.qk_rope_head_dim) + a.kv_lora_rank;
    params += Count(a.kv_lora_rank) * a.num_heads * (Count(a.qk_nope_head_dim) + a.v_head_dim);
    params += Count(a.num_heads) * a.v_head_dim * h;
    return params;
  }
  const Count q_width = Count(a.num_heads) * a.head_dim;
  const Count kv_width = Count(a.num_kv_heads) * a.head_dim;
  Count params = h * (q_width + Count(2) * kv_width) + q_width * h;
  if (a.qkv_bias) params += q_width + Count(2) * kv_width;
  if (a.out_bias) params += h;
  if (a.qk_norm == QkNorm::kPerHead) params += Count(2) * a.head_dim;
  if (a.qk_norm == QkNorm::kFull) params += q_width + kv_width;
  if (a.attention_sinks) params += a.num_heads;
  return params;
}

double Bytes(int64_t params, double bits) { return static_cast<double>(params) * bits / 8.0; }

ParameterCounts CountUnchecked(const MoeModelSpec& spec) {
  ParameterCounts c;
  const Count h = spec.hidden_size;
  c.attention_per_layer = AttentionParams(spec).value();
  c.norms_per_layer = (Count(2) * NormParams(spec, h.value())).value();
  if (spec.moe) {
    const MoeSpec& moe = *spec.moe;
    Count router = h * moe.num_experts;
    if (moe.router_bias) router += moe.num_experts;
    if (moe.router_score_bias) router += moe.num_experts;
    c.router_per_moe_layer = router.value();
    c.params_per_expert = FfnParams(spec, moe.expert_intermediate_size).value();
    Count shared =
        Count(moe.num_shared_experts) * FfnParams(spec, moe.shared_expert_intermediate_size);
    if (moe.shared_expert_gate) shared += h;
    c.shared_experts_per_moe_layer = shared.value();
  }
  if (spec.num_dense_layers() > 0)
    c.dense_ffn_per_dense_layer = FfnParams(spec, spec.dense_intermediate_size).value();

  const Count embed_dim = spec.embedding_dim();
  c.embeddings = (Count(spec.vocab_size) * embed_dim).value();
  if (spec.learned_position_embeddings) {
    c.positions =
        ((Count(spec.max_position_embeddings) + spec.position_embedding_offset) * h).value();
  }
  if (embed_dim.value() != h.value()) c.projections = (Count(2) * embed_dim * h).value();
  Count lm_head = spec.tied_embeddings ? Count(0) : Count(spec.vocab_size) * embed_dim;
  if (spec.lm_head_bias) lm_head += spec.vocab_size;
  c.lm_head = lm_head.value();
  c.final_norm = spec.final_norm ? NormParams(spec, h.value()).value() : 0;

  const Count moe_layers = spec.num_moe_layers();
  const Count dense_layers = spec.num_dense_layers();
  c.attention = (Count(spec.num_layers) * c.attention_per_layer).value();
  c.norms = (Count(spec.num_layers) * c.norms_per_layer + c.final_norm).value();
  c.routers = (moe_layers * c.router_per_moe_layer).value();
  c.routed_experts =
      spec.moe ? (moe_layers * spec.moe->num_experts * c.params_per_expert).value() : 0;
  c.shared_experts = (moe_layers * c.shared_experts_per_moe_layer).value();
  c.dense_ffn = (dense_layers * c.dense_ffn_per_dense_layer).value();
  c.total = (Count(c.embeddings) + c.positions + c.projections + c.lm_head + c.attention + c.norms +
             c.routers + c.routed_experts + c.shared_experts + c.dense_ffn)
                .value();
  const Count unused_experts = spec.moe ? Count(spec.moe->num_experts) - spec.moe->top_k : Count(0);
  c.active = (Count(c.total) - moe_layers * unused_experts * c.params_per_expert).value();
  c.active_excluding_input_embedding =
      (Count(c.active) - (spec.tied_embeddings ? 0 : c.embeddings) - c.positions).value();
  return c;
}

}  // namespace

ParameterCounts CountParameters(const MoeModelSpec& spec) {
  try {
    return CountUnchecked(spec);
  } catch (const base::Error& e) {
    throw base::Error("model '" + spec.name +
                      "': its parameter counts overflow a 64-bit integer (" + e.what() +
                      "): the dimensions (layers " + std::to_string(spec.num_layers) + ", hidden " +
                      std::to_string(spec.hidden_size) + ", vocab " +
                      std::to_string(spec.vocab_size) + ", ...) are too large");
  }
}

int64_t ExpertBytes(const MoeModelSpec& spec) {
  const double bytes = std::ceil(Bytes(CountParameters(spec).params_per_expert, spec.bits.experts));
  if (!(bytes < 9.2e18)) {
    throw base::Error("model '" + spec.name +
                      "': one expert's weights would take more than 9.2e18 bytes");
  }
  return static_cast<int64_t>(bytes);
}

WeightBytes CountWeightBytes(const MoeModelSpec& spec) {
  return CountWeightBytes(spec, CountParameters(spec));
}

WeightBytes CountWeightBytes(const MoeModelSpec& spec, const ParameterCounts& c) {
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

double PassWorkingSetBytes(const MoeModelSpec& spec, double resident_experts, double kv_bytes) {
  if (!(resident_experts >= 0) || !(kv_bytes >= 0)) {
    throw base::Error("working set: resident experts and KV bytes must be >= 0, got " +
                      std::to_string(resident_experts) + " and " + std::to_string(kv_bytes));
  }
  const WeightBytes w = CountWeightBytes(spec);
  const double moe_layers = static_cast<double>(spec.num_moe_layers());
  return static_cast<double>(spec.num_layers) * w.attention +
         moe_layers * (w.router + w.shared_experts) +
         static_cast<double>(spec.num_dense_layers()) * w.dense_ffn + w.lm_head +
         resident_experts * w.expert + kv_bytes;
}

int64_t KvCacheBytesPerToken(const MoeModelSpec& spec, double kv_bits) {
  const AttentionSpec& a = spec.attention;
  const int64_t elements_per_layer =
      a.kind == AttentionKind::kMultiHeadLatent
          ? base::CheckedAdd(a.kv_lora_rank, a.qk_rope_head_dim, "KV cache elements per layer")
          : base::CheckedProduct("KV cache elements per layer", 2, a.num_kv_heads, a.head_dim);
  return static_cast<int64_t>(
      std::ceil(static_cast<double>(base::CheckedMul(elements_per_layer, spec.num_layers,
                                                     "KV cache elements per token")) *
                kv_bits / 8.0));
}

}  // namespace moelab::model
