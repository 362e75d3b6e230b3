#include "model/model_spec.h"

#include <array>
#include <utility>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/limits.h"

namespace moelab::model {
namespace {

constexpr const char* kModelSchema = "moelab.model/1";

template <typename Enum, size_t N>
Enum ParseEnum(const base::JsonReader& reader, std::string_view key,
               const std::array<std::pair<const char*, Enum>, N>& choices,
               std::optional<Enum> fallback = std::nullopt) {
  if (!reader.Has(key) && fallback) return *fallback;
  const std::string value = reader.String(key);
  std::string expected = "one of";
  for (const auto& [name, enum_value] : choices) {
    if (value == name) return enum_value;
    expected += std::string(" \"") + name + "\"";
  }
  reader.Fail(key, expected);
}

constexpr std::array<std::pair<const char*, NormKind>, 3> kNorms{{
    {"rmsnorm", NormKind::kRmsNorm},
    {"layernorm", NormKind::kLayerNorm},
    {"layernorm_nobias", NormKind::kLayerNormNoBias},
}};
constexpr std::array<std::pair<const char*, QkNorm>, 3> kQkNorms{
    {{"none", QkNorm::kNone}, {"head", QkNorm::kPerHead}, {"full", QkNorm::kFull}}};
constexpr std::array<std::pair<const char*, Activation>, 3> kActivations{
    {{"swiglu", Activation::kSwiGlu}, {"relu", Activation::kRelu}, {"gelu", Activation::kGelu}}};
constexpr std::array<std::pair<const char*, AttentionKind>, 2> kAttentionKinds{
    {{"gqa", AttentionKind::kGroupedQuery}, {"mla", AttentionKind::kMultiHeadLatent}}};

template <typename Enum, size_t N>
std::string EnumName(Enum value, const std::array<std::pair<const char*, Enum>, N>& choices) {
  for (const auto& [name, enum_value] : choices) {
    if (enum_value == value) return name;
  }
  return "?";
}

AttentionSpec ParseAttention(const base::JsonReader& reader) {
  AttentionSpec attention;
  attention.kind = ParseEnum(reader, "kind", kAttentionKinds);
  attention.num_heads = reader.Int("num_heads", 1);
  if (attention.kind == AttentionKind::kGroupedQuery) {
    attention.num_kv_heads = reader.Int("num_kv_heads", 1);
    attention.head_dim = reader.Int("head_dim", 1);
    attention.qkv_bias = reader.Bool("qkv_bias", false);
    attention.out_bias = reader.Bool("out_bias", false);
    attention.qk_norm = ParseEnum(reader, "qk_norm", kQkNorms, std::optional(QkNorm::kNone));
    attention.sliding_window = reader.Int("sliding_window", 0, 0);
    if (reader.Has("sliding_window_layers")) {
      const std::string layers = reader.String("sliding_window_layers");
      if (layers == "alternate") {
        attention.sliding_window_alternate = true;
      } else if (layers != "all") {
        reader.Fail("sliding_window_layers", "\"all\" or \"alternate\"");
      }
    }
    attention.attention_sinks = reader.Bool("attention_sinks", false);
  } else {
    attention.q_lora_rank = reader.Int("q_lora_rank", 0);
    attention.kv_lora_rank = reader.Int("kv_lora_rank", 1);
    attention.qk_nope_head_dim = reader.Int("qk_nope_head_dim", 1);
    attention.qk_rope_head_dim = reader.Int("qk_rope_head_dim", 1);
    attention.v_head_dim = reader.Int("v_head_dim", 1);
  }
  reader.RefuseUnknownFields(kModelSchema);
  return attention;
}

MoeSpec ParseMoe(const base::JsonReader& reader) {
  MoeSpec moe;
  moe.num_experts = reader.Count("num_experts", 1, base::kMaxExperts);
  moe.top_k = reader.Int("top_k", 1);
  moe.expert_intermediate_size = reader.Int("expert_intermediate_size", 1);
  moe.num_shared_experts = reader.Int("num_shared_experts", 0, 0);
  moe.shared_expert_intermediate_size = reader.Int("shared_expert_intermediate_size", 0, 0);
  moe.shared_expert_gate = reader.Bool("shared_expert_gate", false);
  moe.first_dense_layers = reader.Int("first_dense_layers", 0, 0);
  moe.router_bias = reader.Bool("router_bias", false);
  moe.router_score_bias = reader.Bool("router_score_bias", false);
  moe.norm_topk_prob = reader.Bool("norm_topk_prob", true);
  reader.RefuseUnknownFields(kModelSchema);
  return moe;
}

WeightBits ParseBits(const base::JsonReader& reader) {
  // Each part defaults to 16 bits (bf16/fp16 storage), stated in docs/schemas.md.
  WeightBits bits;
  bits.attention = reader.Number("attention", 0.0, false, 16);
  bits.experts = reader.Number("experts", 0.0, false, 16);
  bits.shared_experts = reader.Number("shared_experts", 0.0, false, 16);
  bits.dense_ffn = reader.Number("dense_ffn", 0.0, false, 16);
  bits.embeddings = reader.Number("embeddings", 0.0, false, 16);
  bits.router = reader.Number("router", 0.0, false, 16);
  reader.RefuseUnknownFields(kModelSchema);
  return bits;
}

void Require(bool condition, const std::string& origin, const std::string& field,
             const std::string& message) {
  if (!condition) throw base::Error(origin + ": field '" + field + "': " + message);
}

}  // namespace

double MoeModelSpec::sparsity() const {
  if (!moe) return 1.0;
  return static_cast<double>(moe->top_k) / static_cast<double>(moe->num_experts);
}

MoeModelSpec ModelSpecFromJson(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader(json, origin);
  const std::string schema = reader.String("schema");
  if (schema != kModelSchema) reader.Fail("schema", std::string("\"") + kModelSchema + "\"");
  MoeModelSpec spec;
  spec.name = reader.String("name");
  spec.display_name = reader.String("display_name", spec.name);
  spec.family = reader.String("family");
  spec.hf_repo = reader.String("hf_repo", "");
  spec.num_layers = reader.Count("num_layers", 1, base::kMaxLayers);
  spec.hidden_size = reader.Int("hidden_size", 1);
  spec.vocab_size = reader.Int("vocab_size", 1);
  spec.tied_embeddings = reader.Bool("tied_embeddings");
  spec.lm_head_bias = reader.Bool("lm_head_bias", false);
  spec.max_position_embeddings = reader.Int("max_position_embeddings", 1);
  spec.norm = ParseEnum(reader, "norm", kNorms);
  spec.final_norm = reader.Bool("final_norm", true);
  spec.attention = ParseAttention(reader.Object("attention"));
  const base::JsonReader ffn = reader.Object("ffn");
  spec.activation = ParseEnum(ffn, "activation", kActivations);
  spec.ffn_bias = ffn.Bool("bias", false);
  ffn.RefuseUnknownFields(kModelSchema);
  spec.dense_intermediate_size = reader.Int("dense_intermediate_size", 0, 0);
  if (auto moe = reader.OptionalObject("moe")) spec.moe = ParseMoe(*moe);
  spec.word_embed_proj_dim = reader.Int("word_embed_proj_dim", 0, 0);
  if (spec.word_embed_proj_dim == spec.hidden_size) spec.word_embed_proj_dim = 0;  // no projection
  spec.learned_position_embeddings = reader.Bool("learned_position_embeddings", false);
  spec.position_embedding_offset = reader.Int("position_embedding_offset", 0, 0);
  if (auto bits = reader.OptionalObject("bits")) spec.bits = ParseBits(*bits);
  if (auto published = reader.OptionalObject("published")) {
    spec.published =
        PublishedCounts{published->Int("total_params", 1), published->Int("active_params", 1),
                        published->String("source", "")};
    published->RefuseUnknownFields(kModelSchema);
  }
  reader.RefuseUnknownFields(kModelSchema);
  ValidateModelSpec(spec, origin);
  return spec;
}

void ValidateModelSpec(const MoeModelSpec& spec, const std::string& origin) {
  // The file readers bound num_layers (kMaxLayers), and ValidateExecutorShape a --layers override.
  Require(spec.num_layers > 0, origin, "num_layers", "must be at least 1");
  Require(spec.hidden_size > 0, origin, "hidden_size", "must be at least 1");
  Require(spec.vocab_size > 0, origin, "vocab_size", "must be at least 1");
  const AttentionSpec& attention = spec.attention;
  Require(attention.num_heads > 0, origin, "attention.num_heads", "must be at least 1");
  if (attention.kind == AttentionKind::kGroupedQuery) {
    Require(attention.num_kv_heads > 0 && attention.num_heads % attention.num_kv_heads == 0, origin,
            "attention.num_kv_heads",
            "must divide attention.num_heads (" + std::to_string(attention.num_heads) + "), got " +
                std::to_string(attention.num_kv_heads));
    Require(attention.head_dim > 0, origin, "attention.head_dim", "must be at least 1");
  } else {
    Require(attention.kv_lora_rank > 0, origin, "attention.kv_lora_rank", "must be at least 1");
    Require(attention.v_head_dim > 0, origin, "attention.v_head_dim", "must be at least 1");
  }
  const bool has_dense_layers = !spec.moe || spec.moe->first_dense_layers > 0;
  if (has_dense_layers) {
    Require(spec.dense_intermediate_size > 0, origin, "dense_intermediate_size",
            "must be at least 1 when the model has dense FFN layers");
  }
  if (spec.moe) {
    const MoeSpec& moe = *spec.moe;
    Require(moe.num_experts >= 1 && moe.num_experts <= base::kMaxExperts, origin, "moe.num_experts",
            "must be from 1 to " + std::to_string(base::kMaxExperts) + " (docs/limits.md), got " +
                std::to_string(moe.num_experts));
    Require(moe.top_k >= 1 && moe.top_k <= moe.num_experts, origin, "moe.top_k",
            "must be between 1 and moe.num_experts (" + std::to_string(moe.num_experts) +
                "), got " + std::to_string(moe.top_k));
    Require(moe.first_dense_layers < spec.num_layers, origin, "moe.first_dense_layers",
            "must be less than num_layers (" + std::to_string(spec.num_layers) + ")");
    Require(moe.num_shared_experts == 0 || moe.shared_expert_intermediate_size > 0, origin,
            "moe.shared_expert_intermediate_size", "must be at least 1 when shared experts exist");
  }
  for (const auto& [field, value] : {std::pair{"bits.attention", spec.bits.attention},
                                     {"bits.experts", spec.bits.experts},
                                     {"bits.shared_experts", spec.bits.shared_experts},
                                     {"bits.dense_ffn", spec.bits.dense_ffn},
                                     {"bits.embeddings", spec.bits.embeddings},
                                     {"bits.router", spec.bits.router}}) {
    Require(value > 0 && value <= 32, origin, field, "must be in (0, 32] bits per weight");
  }
}

nlohmann::json ModelSpecToJson(const MoeModelSpec& spec) {
  nlohmann::json json;
  json["schema"] = kModelSchema;
  json["name"] = spec.name;
  json["display_name"] = spec.display_name;
  json["family"] = spec.family;
  json["hf_repo"] = spec.hf_repo;
  json["num_layers"] = spec.num_layers;
  json["hidden_size"] = spec.hidden_size;
  json["vocab_size"] = spec.vocab_size;
  json["tied_embeddings"] = spec.tied_embeddings;
  json["lm_head_bias"] = spec.lm_head_bias;
  json["max_position_embeddings"] = spec.max_position_embeddings;
  json["norm"] = ToString(spec.norm);
  json["final_norm"] = spec.final_norm;
  const AttentionSpec& a = spec.attention;
  nlohmann::json attention{{"kind", ToString(a.kind)}, {"num_heads", a.num_heads}};
  if (a.kind == AttentionKind::kGroupedQuery) {
    attention.update({{"num_kv_heads", a.num_kv_heads},
                      {"head_dim", a.head_dim},
                      {"qkv_bias", a.qkv_bias},
                      {"out_bias", a.out_bias},
                      {"qk_norm", ToString(a.qk_norm)},
                      {"sliding_window", a.sliding_window},
                      {"sliding_window_layers", a.sliding_window_alternate ? "alternate" : "all"},
                      {"attention_sinks", a.attention_sinks}});
  } else {
    attention.update({{"q_lora_rank", a.q_lora_rank},
                      {"kv_lora_rank", a.kv_lora_rank},
                      {"qk_nope_head_dim", a.qk_nope_head_dim},
                      {"qk_rope_head_dim", a.qk_rope_head_dim},
                      {"v_head_dim", a.v_head_dim}});
  }
  json["attention"] = attention;
  json["ffn"] = {{"activation", ToString(spec.activation)}, {"bias", spec.ffn_bias}};
  json["dense_intermediate_size"] = spec.dense_intermediate_size;
  if (spec.moe) {
    const MoeSpec& m = *spec.moe;
    json["moe"] = {{"num_experts", m.num_experts},
                   {"top_k", m.top_k},
                   {"expert_intermediate_size", m.expert_intermediate_size},
                   {"num_shared_experts", m.num_shared_experts},
                   {"shared_expert_intermediate_size", m.shared_expert_intermediate_size},
                   {"shared_expert_gate", m.shared_expert_gate},
                   {"first_dense_layers", m.first_dense_layers},
                   {"router_bias", m.router_bias},
                   {"router_score_bias", m.router_score_bias},
                   {"norm_topk_prob", m.norm_topk_prob}};
  }
  json["word_embed_proj_dim"] = spec.word_embed_proj_dim;
  json["learned_position_embeddings"] = spec.learned_position_embeddings;
  json["position_embedding_offset"] = spec.position_embedding_offset;
  json["bits"] = {{"attention", spec.bits.attention},           {"experts", spec.bits.experts},
                  {"shared_experts", spec.bits.shared_experts}, {"dense_ffn", spec.bits.dense_ffn},
                  {"embeddings", spec.bits.embeddings},         {"router", spec.bits.router}};
  if (spec.published) {
    json["published"] = {{"total_params", spec.published->total_params},
                         {"active_params", spec.published->active_params},
                         {"source", spec.published->source}};
  }
  return json;
}

std::string ToString(AttentionKind kind) { return EnumName(kind, kAttentionKinds); }
std::string ToString(NormKind kind) { return EnumName(kind, kNorms); }
std::string ToString(QkNorm kind) { return EnumName(kind, kQkNorms); }
std::string ToString(Activation kind) { return EnumName(kind, kActivations); }

}  // namespace moelab::model
