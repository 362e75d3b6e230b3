#include "model/executor_shape.h"

#include <algorithm>
#include <string>

#include "base/checked.h"
#include "base/error.h"
#include "base/limits.h"

namespace moelab::model {
namespace {

void Require(bool ok, const std::string& model, const std::string& field, const std::string& what) {
  if (!ok) throw base::Error("model '" + model + "': " + field + ": " + what);
}

// The architecture the executor implements; anything else is refused by name.
void RequireExecutable(const MoeModelSpec& spec) {
  const std::string& n = spec.name;
  const AttentionSpec& a = spec.attention;
  Require(a.kind == AttentionKind::kGroupedQuery, n, "attention",
          "the executor implements grouped-query attention, not multi-head latent attention");
  Require(spec.norm == NormKind::kRmsNorm, n, "norm", "the executor implements RMSNorm only");
  Require(spec.activation == Activation::kSwiGlu && !spec.ffn_bias, n, "ffn",
          "the executor implements bias-free SwiGLU FFNs only");
  Require(!a.attention_sinks && !a.sliding_window_alternate, n, "attention",
          "attention sinks and alternating windows are not implemented");
  Require(a.qk_norm != QkNorm::kFull, n, "attention.qk_norm",
          "full-width q/k norms are not implemented");
  Require(a.out_bias == false, n, "attention.out_bias",
          "output-projection biases are not implemented");
  Require(spec.word_embed_proj_dim == 0 && !spec.learned_position_embeddings, n, "embeddings",
          "embedding projections and learned positions are not implemented");
  if (spec.moe) {
    Require(!spec.moe->router_bias && !spec.moe->router_score_bias, n, "moe",
            "router biases are not implemented");
  }
}

}  // namespace

const std::array<std::pair<const char*, ShapeOverrides::Field>, 13>& ShapeOverrides::Fields() {
  static const std::array<std::pair<const char*, Field>, 13> fields = {{
      {"layers", &ShapeOverrides::layers},
      {"hidden", &ShapeOverrides::hidden},
      {"intermediate", &ShapeOverrides::intermediate},
      {"dense_intermediate", &ShapeOverrides::dense_intermediate},
      {"experts", &ShapeOverrides::experts},
      {"top_k", &ShapeOverrides::top_k},
      {"heads", &ShapeOverrides::heads},
      {"kv_heads", &ShapeOverrides::kv_heads},
      {"head_dim", &ShapeOverrides::head_dim},
      {"vocab", &ShapeOverrides::vocab},
      {"shared_experts", &ShapeOverrides::shared_experts},
      {"shared_intermediate", &ShapeOverrides::shared_intermediate},
      {"max_positions", &ShapeOverrides::max_positions},
  }};
  return fields;
}

ShapeOverrides ShapeOverrides::OverriddenBy(const ShapeOverrides& given) const {
  ShapeOverrides merged = *this;
  for (const auto& [name, field] : Fields()) {
    if (given.*field) merged.*field = given.*field;
  }
  return merged;
}

ShapeOverrides DefaultTargetShape() {
  ShapeOverrides s;
  s.layers = 8;
  s.hidden = 1024;
  s.intermediate = 3584;
  s.heads = 16;
  s.kv_heads = 4;
  s.head_dim = 64;
  s.max_positions = 4096;
  return s;
}

ShapeOverrides DefaultDraftShape() {
  ShapeOverrides s;
  s.layers = 4;
  s.hidden = 512;
  s.dense_intermediate = 1536;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.max_positions = 4096;
  return s;
}

void ValidateExecutorShape(const MoeModelSpec& s) {
  const std::string& name = s.name;
  const AttentionSpec& a = s.attention;
  Require(s.num_layers >= 1 && s.num_layers <= base::kMaxLayers, name, "layers",
          "must be from 1 to " + std::to_string(base::kMaxLayers) + " (docs/limits.md), got " +
              std::to_string(s.num_layers));
  Require(s.hidden_size >= 1, name, "hidden", "must be at least 1");
  Require(s.vocab_size >= 2, name, "vocab", "must be at least 2");
  Require(a.num_heads >= 1 && a.num_kv_heads >= 1 && a.num_heads % a.num_kv_heads == 0, name,
          "kv_heads",
          "must divide heads (" + std::to_string(a.num_heads) + "), got " +
              std::to_string(a.num_kv_heads));
  Require(a.head_dim >= 2 && a.head_dim % 2 == 0, name, "head_dim", "must be even and at least 2");
  Require(s.max_position_embeddings >= 2 && s.max_position_embeddings <= kMaxExecutorPositions,
          name, "max_positions",
          "must be 2.." + std::to_string(kMaxExecutorPositions) +
              " (the rotary table and attention scores are sized by it), got " +
              std::to_string(s.max_position_embeddings));
  if (s.moe) {
    const MoeSpec& moe = *s.moe;
    Require(moe.top_k >= 1 && moe.top_k <= moe.num_experts, name, "top_k",
            "must be between 1 and experts (" + std::to_string(moe.num_experts) + "), got " +
                std::to_string(moe.top_k));
    Require(moe.expert_intermediate_size >= 1, name, "intermediate", "must be at least 1");
    Require(moe.first_dense_layers < s.num_layers, name, "first_dense_layers",
            "must be below layers");
    Require(moe.num_shared_experts == 0 || moe.shared_expert_intermediate_size >= 1, name,
            "shared_intermediate", "must be at least 1 with shared experts");
  }
  // Every size the executor forms as an int64 product must fit one, checked before any weight
  // bytes are estimated (--heads 4611686018427387904 wrapped q_width to 0 and crashed; --experts
  // 9e18 ended in bad_alloc, "internal error"). Whether the sizes fit in memory is checked next.
  const std::string model = "model '" + name + "'";
  if (!s.moe || s.moe->first_dense_layers > 0) {
    Require(s.dense_intermediate_size >= 1, name, "dense_intermediate",
            "must be at least 1 for dense layers");
    base::CheckedProduct(model + ": hidden x dense_intermediate", s.hidden_size,
                         s.dense_intermediate_size, 3);
  }
  const int64_t q = base::CheckedProduct(model + ": heads x head_dim", a.num_heads, a.head_dim);
  const int64_t kv =
      base::CheckedProduct(model + ": kv_heads x head_dim", a.num_kv_heads, a.head_dim);
  base::CheckedProduct(model + ": attention weights per layer",
                       base::CheckedAdd(q, base::CheckedMul(2, kv, model), model), s.hidden_size,
                       2);
  base::CheckedProduct(model + ": vocab x hidden", s.vocab_size, s.hidden_size, 2);
  if (s.moe) {
    base::CheckedProduct(model + ": experts x hidden x intermediate", s.moe->num_experts,
                         s.hidden_size, s.moe->expert_intermediate_size, 3);
    base::CheckedProduct(model + ": shared experts x hidden x shared_intermediate",
                         s.moe->num_shared_experts, s.hidden_size,
                         s.moe->shared_expert_intermediate_size, 3);
  }
  // After the products (a wrapping count is named as such): the bound the model files have.
  if (s.moe) {
    Require(s.moe->num_experts <= base::kMaxExperts, name, "experts",
            "must be at most " + std::to_string(base::kMaxExperts) + " (docs/limits.md), got " +
                std::to_string(s.moe->num_experts));
  }
}

MoeModelSpec ExecutorShape(const MoeModelSpec& spec, const ShapeOverrides& o) {
  RequireExecutable(spec);
  const AttentionSpec& a = spec.attention;
  // A fresh spec: only what the executor runs (its numerics apart), with bf16 weights.
  MoeModelSpec s;
  s.name = spec.name;
  s.display_name = spec.name;
  s.family = spec.family;
  s.num_layers = o.layers.value_or(spec.num_layers);
  s.hidden_size = o.hidden.value_or(spec.hidden_size);
  s.vocab_size = o.vocab.value_or(spec.vocab_size);
  s.tied_embeddings = spec.tied_embeddings;
  s.attention.num_heads = o.heads.value_or(a.num_heads);
  s.attention.num_kv_heads = o.kv_heads.value_or(a.num_kv_heads);
  s.attention.head_dim = o.head_dim.value_or(a.head_dim);
  s.attention.qkv_bias = a.qkv_bias;
  s.attention.qk_norm = a.qk_norm == QkNorm::kPerHead ? QkNorm::kPerHead : QkNorm::kNone;
  s.attention.sliding_window = a.sliding_window;
  if (spec.moe) {
    MoeSpec moe;
    moe.num_experts = o.experts.value_or(spec.moe->num_experts);
    moe.top_k = o.top_k.value_or(spec.moe->top_k);
    moe.expert_intermediate_size = o.intermediate.value_or(spec.moe->expert_intermediate_size);
    moe.num_shared_experts = o.shared_experts.value_or(spec.moe->num_shared_experts);
    moe.shared_expert_intermediate_size =
        o.shared_intermediate.value_or(spec.moe->shared_expert_intermediate_size);
    moe.shared_expert_gate = spec.moe->shared_expert_gate && moe.num_shared_experts > 0;
    moe.norm_topk_prob = spec.moe->norm_topk_prob;
    moe.first_dense_layers = std::min(spec.moe->first_dense_layers, s.num_layers - 1);
    // --experts 0 makes a dense model of it, as the executor runs one.
    if (moe.num_experts > 0) s.moe = moe;
    s.dense_intermediate_size = o.dense_intermediate.value_or(spec.dense_intermediate_size);
  } else {
    if (o.experts || o.top_k)
      throw base::Error("model '" + spec.name + "' is dense: --experts and --top-k do not apply");
    s.dense_intermediate_size =
        o.dense_intermediate.value_or(o.intermediate.value_or(spec.dense_intermediate_size));
  }
  s.max_position_embeddings =
      o.max_positions.value_or(std::min<int64_t>(spec.max_position_embeddings, 4096));
  ValidateExecutorShape(s);
  ValidateModelSpec(s, "executor shape of '" + s.name + "'");
  return s;
}

MoeModelSpec ScaledSpec(const MoeModelSpec& spec, const ShapeOverrides& o) {
  for (const auto& [name, field] : ShapeOverrides::Fields()) {
    if (o.*field) return ExecutorShape(spec, o);
  }
  return spec;
}

MoeModelSpec ExecutorDraftShape(const MoeModelSpec& draft, const MoeModelSpec& executor_target) {
  ShapeOverrides overrides = DefaultDraftShape();
  overrides.vocab = executor_target.vocab_size;
  return ExecutorShape(draft, overrides);
}

}  // namespace moelab::model
