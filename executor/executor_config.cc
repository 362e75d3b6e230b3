#include "executor/executor_config.h"

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"

namespace moelab::executor {
namespace {

void Require(bool ok, const std::string& model, const std::string& field, const std::string& what) {
  if (!ok) throw base::Error("model '" + model + "': " + field + ": " + what);
}

}  // namespace

void ExecutorConfig::Validate() const {
  Require(num_layers >= 1, name, "layers", "must be at least 1");
  Require(hidden_size >= 1, name, "hidden", "must be at least 1");
  Require(vocab_size >= 2, name, "vocab", "must be at least 2");
  Require(
      num_heads >= 1 && num_kv_heads >= 1 && num_heads % num_kv_heads == 0, name, "kv_heads",
      "must divide heads (" + std::to_string(num_heads) + "), got " + std::to_string(num_kv_heads));
  Require(head_dim >= 2 && head_dim % 2 == 0, name, "head_dim", "must be even and at least 2");
  Require(max_positions >= 2 && max_positions <= kMaxExecutorPositions, name, "max_positions",
          "must be 2.." + std::to_string(kMaxExecutorPositions) +
              " (the rotary table and attention scores are sized by it), got " +
              std::to_string(max_positions));
  if (is_moe()) {
    Require(top_k >= 1 && top_k <= num_experts, name, "top_k",
            "must be between 1 and experts (" + std::to_string(num_experts) + "), got " +
                std::to_string(top_k));
    Require(expert_intermediate_size >= 1, name, "intermediate", "must be at least 1");
    Require(first_dense_layers < num_layers, name, "first_dense_layers", "must be below layers");
    Require(num_shared_experts == 0 || shared_expert_intermediate_size >= 1, name,
            "shared_intermediate", "must be at least 1 with shared experts");
  }
  // Every size the executor forms as an int64 product must fit one, checked before any weight
  // bytes are estimated (--heads 4611686018427387904 wrapped q_width to 0 and crashed; --experts
  // 9e18 ended in bad_alloc, "internal error"). Whether the sizes fit in memory is checked next.
  const std::string model = "model '" + name + "'";
  if (!is_moe() || first_dense_layers > 0) {
    Require(dense_intermediate_size >= 1, name, "dense_intermediate",
            "must be at least 1 for dense layers");
    base::CheckedProduct(model + ": hidden x dense_intermediate", hidden_size,
                         dense_intermediate_size, 3);
  }
  const int64_t q = base::CheckedProduct(model + ": heads x head_dim", num_heads, head_dim);
  const int64_t kv = base::CheckedProduct(model + ": kv_heads x head_dim", num_kv_heads, head_dim);
  base::CheckedProduct(model + ": attention weights per layer",
                       base::CheckedAdd(q, base::CheckedMul(2, kv, model), model), hidden_size, 2);
  base::CheckedProduct(model + ": vocab x hidden", vocab_size, hidden_size, 2);
  if (is_moe()) {
    base::CheckedProduct(model + ": experts x hidden x intermediate", num_experts, hidden_size,
                         expert_intermediate_size, 3);
    base::CheckedProduct(model + ": shared experts x hidden x shared_intermediate",
                         num_shared_experts, hidden_size, shared_expert_intermediate_size, 3);
  }
  // After the products (a wrapping count is named as such): the bound the model files have.
  if (is_moe()) {
    Require(num_experts <= base::kMaxExperts, name, "experts",
            "must be at most " + std::to_string(base::kMaxExperts) + " (docs/limits.md), got " +
                std::to_string(num_experts));
  }
}

ExecutorConfig ExecutorConfigFromSpec(const model::MoeModelSpec& spec, const ShapeOverrides& o) {
  const std::string& n = spec.name;
  const model::AttentionSpec& a = spec.attention;
  Require(a.kind == model::AttentionKind::kGroupedQuery, n, "attention",
          "the executor implements grouped-query attention, not multi-head latent attention");
  Require(spec.norm == model::NormKind::kRmsNorm, n, "norm",
          "the executor implements RMSNorm only");
  Require(spec.activation == model::Activation::kSwiGlu && !spec.ffn_bias, n, "ffn",
          "the executor implements bias-free SwiGLU FFNs only");
  Require(!a.attention_sinks && !a.sliding_window_alternate, n, "attention",
          "attention sinks and alternating windows are not implemented");
  Require(a.qk_norm != model::QkNorm::kFull, n, "attention.qk_norm",
          "full-width q/k norms are not implemented");
  Require(a.out_bias == false, n, "attention.out_bias",
          "output-projection biases are not implemented");
  Require(spec.word_embed_proj_dim == 0 && !spec.learned_position_embeddings, n, "embeddings",
          "embedding projections and learned positions are not implemented");
  if (spec.moe) {
    Require(!spec.moe->router_bias && !spec.moe->router_score_bias, n, "moe",
            "router biases are not implemented");
  }

  ExecutorConfig c;
  c.name = spec.name;
  c.family = spec.family;
  c.num_layers = o.layers.value_or(spec.num_layers);
  c.hidden_size = o.hidden.value_or(spec.hidden_size);
  c.vocab_size = o.vocab.value_or(spec.vocab_size);
  c.tied_embeddings = spec.tied_embeddings;
  c.num_heads = o.heads.value_or(a.num_heads);
  c.num_kv_heads = o.kv_heads.value_or(a.num_kv_heads);
  c.head_dim = o.head_dim.value_or(a.head_dim);
  c.qkv_bias = a.qkv_bias;
  c.qk_norm = a.qk_norm == model::QkNorm::kPerHead;
  c.sliding_window = a.sliding_window;
  if (spec.moe) {
    c.num_experts = o.experts.value_or(spec.moe->num_experts);
    c.top_k = o.top_k.value_or(spec.moe->top_k);
    c.expert_intermediate_size = o.intermediate.value_or(spec.moe->expert_intermediate_size);
    c.num_shared_experts = o.shared_experts.value_or(spec.moe->num_shared_experts);
    c.shared_expert_intermediate_size =
        o.shared_intermediate.value_or(spec.moe->shared_expert_intermediate_size);
    c.shared_expert_gate = spec.moe->shared_expert_gate && c.num_shared_experts > 0;
    c.norm_topk_prob = spec.moe->norm_topk_prob;
    c.first_dense_layers = std::min(spec.moe->first_dense_layers, c.num_layers - 1);
    c.dense_intermediate_size = o.dense_intermediate.value_or(spec.dense_intermediate_size);
  } else {
    if (o.experts || o.top_k)
      throw base::Error("model '" + n + "' is dense: --experts and --top-k do not apply");
    c.dense_intermediate_size =
        o.dense_intermediate.value_or(o.intermediate.value_or(spec.dense_intermediate_size));
  }
  c.max_positions = o.max_positions.value_or(std::min<int64_t>(spec.max_position_embeddings, 4096));
  c.Validate();
  return c;
}

model::MoeModelSpec SpecFromExecutorConfig(const ExecutorConfig& c) {
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
  // Stored bits per weight including block scales (8.5 for q8_0, 4.5 for q4_0), so the planner,
  // the simulator and the profile count the bytes this executor streams.
  spec.bits.experts = kernels::StoredBitsPerWeight(c.expert_format);
  spec.bits.attention = kernels::StoredBitsPerWeight(c.attention_format);
  model::ValidateModelSpec(spec, "executor shape of '" + c.name + "'");
  return spec;
}

model::MoeModelSpec ScaledSpec(const model::MoeModelSpec& spec, const ShapeOverrides& o) {
  const bool any = o.layers || o.hidden || o.intermediate || o.dense_intermediate || o.experts ||
                   o.top_k || o.heads || o.kv_heads || o.head_dim || o.vocab || o.shared_experts ||
                   o.shared_intermediate || o.max_positions;
  return any ? SpecFromExecutorConfig(ExecutorConfigFromSpec(spec, o)) : spec;
}

}  // namespace moelab::executor
