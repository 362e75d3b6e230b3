#include "model/hf_import.h"

#include <filesystem>
#include <functional>
#include <map>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/limits.h"

namespace moelab::model {
namespace {

using Importer = std::function<void(const base::JsonReader&, MoeModelSpec&)>;

// Fields every family shares (Llama naming); DBRX and OPT override what they name differently.
void ImportCommon(const base::JsonReader& c, MoeModelSpec& spec) {
  spec.num_layers = c.Count("num_hidden_layers", 1, base::kMaxLayers);
  spec.hidden_size = c.Int("hidden_size", 1);
  spec.vocab_size = c.Int("vocab_size", 1);
  spec.tied_embeddings = c.Bool("tie_word_embeddings", false);
  spec.max_position_embeddings = c.Int("max_position_embeddings", 1);
  spec.norm = NormKind::kRmsNorm;
  spec.activation = Activation::kSwiGlu;
  AttentionSpec& a = spec.attention;
  a.kind = AttentionKind::kGroupedQuery;
  a.num_heads = c.Int("num_attention_heads", 1);
  a.num_kv_heads = c.Int("num_key_value_heads", 1, a.num_heads);
  if (a.num_kv_heads > a.num_heads) {
    c.Fail("num_key_value_heads",
           "at most num_attention_heads (" + std::to_string(a.num_heads) + ")");
  }
  if (spec.hidden_size % a.num_heads != 0 && !c.Has("head_dim")) {
    c.Fail("head_dim", "a head_dim (hidden_size is not a multiple of num_attention_heads)");
  }
  a.head_dim = c.Int("head_dim", 1, spec.hidden_size / a.num_heads);
  a.qkv_bias = c.Bool("attention_bias", false);
  a.out_bias = a.qkv_bias;
  const bool window_enabled = c.Bool("use_sliding_window", true);
  const int64_t window = c.Int("sliding_window", 0, 0);
  if (window_enabled && window > 0 && window < spec.max_position_embeddings)
    a.sliding_window = window;
}

// quantization_config, whatever the family (every importer's config may carry one): the bits a
// stored weight takes, scales included, in the layers the scheme quantizes. Unknown schemes are
// refused, never read as bf16 (a GPTQ Mixtral was sized at its bf16 93 GB, 3.6x its files).
void ImportQuantization(const base::JsonReader& c, MoeModelSpec& spec) {
  auto quantization = c.OptionalObject("quantization_config");
  if (!quantization) return;
  const std::string method = quantization->String("quant_method");
  WeightBits& bits = spec.bits;
  if (method == "fp8") {
    bits.attention = bits.experts = bits.shared_experts = bits.dense_ffn = 8;
  } else if (method == "mxfp4") {
    bits.experts = 4.25;
  } else if (method == "gptq" || method == "awq") {
    // Every decoder linear layer at `bits`, with an fp16 scale and a packed zero point per group
    // of group_size input rows (-1: one per output channel, a negligible share).
    const int64_t weight_bits = quantization->Int("bits", 1);
    if (weight_bits != 2 && weight_bits != 3 && weight_bits != 4 && weight_bits != 8)
      quantization->Fail("bits", "2, 3, 4 or 8");
    const int64_t group_size = quantization->Int("group_size", -1, 128);
    if (group_size == 0) quantization->Fail("group_size", "-1 (per channel) or >= 1");
    const double stored = static_cast<double>(weight_bits) +
                          (group_size > 0 ? (16.0 + static_cast<double>(weight_bits)) /
                                                static_cast<double>(group_size)
                                          : 0.0);
    bits.attention = bits.experts = bits.shared_experts = bits.dense_ffn = stored;
  } else {
    quantization->Fail("quant_method",
                       "\"fp8\", \"mxfp4\", \"gptq\" or \"awq\" (other schemes: write a "
                       "moelab.model/1 file with explicit bits)");
  }
}

MoeSpec& Moe(MoeModelSpec& spec) {
  if (!spec.moe) spec.moe = MoeSpec{};
  return *spec.moe;
}

void ImportMixtral(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("num_local_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("intermediate_size", 1);
  moe.norm_topk_prob = true;
}

void RequireEveryLayerSparse(const base::JsonReader& c) {
  if (c.Int("decoder_sparse_step", 1, 1) != 1) {
    c.Fail("decoder_sparse_step",
           "1 (MoE in every layer; interleaved dense layers are not modelled)");
  }
  if (c.Has("mlp_only_layers") && !c.json()["mlp_only_layers"].empty()) {
    c.Fail("mlp_only_layers", "an empty list (dense-only layers are not modelled)");
  }
}

void ImportQwen2Moe(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.attention.qkv_bias = true;  // Qwen2 attention always has q/k/v biases, no output bias
  spec.attention.out_bias = false;
  RequireEveryLayerSparse(c);
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("num_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("moe_intermediate_size", 1);
  moe.shared_expert_intermediate_size = c.Int("shared_expert_intermediate_size", 0, 0);
  moe.num_shared_experts = moe.shared_expert_intermediate_size > 0 ? 1 : 0;
  moe.shared_expert_gate = moe.num_shared_experts > 0;
  moe.norm_topk_prob = c.Bool("norm_topk_prob", false);
}

void ImportQwen3Moe(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.attention.qk_norm = QkNorm::kPerHead;
  RequireEveryLayerSparse(c);
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("num_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("moe_intermediate_size", 1);
  moe.norm_topk_prob = c.Bool("norm_topk_prob", false);
}

void ImportDeepSeek(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  AttentionSpec& a = spec.attention;
  a = AttentionSpec{};
  a.kind = AttentionKind::kMultiHeadLatent;
  a.num_heads = c.Int("num_attention_heads", 1);
  a.q_lora_rank = c.Int("q_lora_rank", 0, 0);
  a.kv_lora_rank = c.Int("kv_lora_rank", 1);
  a.qk_nope_head_dim = c.Int("qk_nope_head_dim", 1);
  a.qk_rope_head_dim = c.Int("qk_rope_head_dim", 1);
  a.v_head_dim = c.Int("v_head_dim", 1);
  if (c.Int("moe_layer_freq", 1, 1) != 1) {
    c.Fail("moe_layer_freq", "1 (MoE in every layer after the first dense ones)");
  }
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("n_routed_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("moe_intermediate_size", 1);
  moe.num_shared_experts = c.Int("n_shared_experts", 0, 0);
  moe.shared_expert_intermediate_size =
      moe.num_shared_experts > 0 ? moe.expert_intermediate_size : 0;
  moe.first_dense_layers = c.Int("first_k_dense_replace", 0, 0);
  moe.norm_topk_prob = c.Bool("norm_topk_prob", false);
  moe.router_score_bias = c.String("topk_method", "greedy") == "noaux_tc";
  spec.dense_intermediate_size = moe.first_dense_layers > 0 ? c.Int("intermediate_size", 1) : 0;
}

void ImportOlmoe(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.attention.qk_norm = QkNorm::kFull;
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("num_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("intermediate_size", 1);
  moe.norm_topk_prob = c.Bool("norm_topk_prob", false);
}

void ImportPhiMoe(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportMixtral(c, spec);
  spec.norm = NormKind::kLayerNorm;
  // SparseMixer routing weighs the chosen experts by masked softmaxes, not a renormalized top-K.
  spec.moe->norm_topk_prob = false;
  spec.attention.qkv_bias = spec.attention.out_bias = c.Bool("attention_bias", false);
  spec.lm_head_bias = c.Bool("lm_head_bias", false);
}

void ImportDbrx(const base::JsonReader& c, MoeModelSpec& spec) {
  spec.num_layers = c.Count("n_layers", 1, base::kMaxLayers);
  spec.hidden_size = c.Int("d_model", 1);
  spec.vocab_size = c.Int("vocab_size", 1);
  spec.tied_embeddings = c.Bool("tie_word_embeddings", false);
  spec.max_position_embeddings = c.Int("max_seq_len", 1);
  spec.norm = NormKind::kLayerNormNoBias;
  spec.activation = Activation::kSwiGlu;
  AttentionSpec& a = spec.attention;
  a.num_heads = c.Int("n_heads", 1);
  a.num_kv_heads = c.Object("attn_config").Count("kv_n_heads", 1, a.num_heads);
  a.head_dim = spec.hidden_size / a.num_heads;
  const base::JsonReader ffn = c.Object("ffn_config");
  MoeSpec& moe = Moe(spec);
  moe.num_experts = ffn.Count("moe_num_experts", 1, base::kMaxExperts);
  moe.top_k = ffn.Count("moe_top_k", 1, moe.num_experts);
  moe.expert_intermediate_size = ffn.Int("ffn_hidden_size", 1);
  moe.norm_topk_prob = ffn.Number("moe_normalize_expert_weights", 0.0, true, 1.0) > 0;
}

void ImportGptOss(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.attention.qkv_bias = spec.attention.out_bias = c.Bool("attention_bias", true);
  spec.attention.attention_sinks = true;
  spec.attention.sliding_window = c.Int("sliding_window", 0, 0);
  if (c.Has("layer_types")) {
    const auto& types = c.json()["layer_types"];
    bool alternate = types.is_array() && !types.empty();
    for (size_t i = 0; alternate && i < types.size(); ++i) {
      alternate = types[i] == (i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    if (!alternate) c.Fail("layer_types", "alternating \"sliding_attention\", \"full_attention\"");
  }
  spec.attention.sliding_window_alternate = spec.attention.sliding_window > 0;
  spec.ffn_bias = true;
  MoeSpec& moe = Moe(spec);
  moe.num_experts = c.Count("num_local_experts", 1, base::kMaxExperts);
  moe.top_k = c.Count("num_experts_per_tok", 1, moe.num_experts);
  moe.expert_intermediate_size = c.Int("intermediate_size", 1);
  moe.router_bias = true;
}

void ImportLlama(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.ffn_bias = c.Bool("mlp_bias", false);
  spec.dense_intermediate_size = c.Int("intermediate_size", 1);
}

void ImportQwen2(const base::JsonReader& c, MoeModelSpec& spec) {
  ImportCommon(c, spec);
  spec.attention.qkv_bias = true;
  spec.attention.out_bias = false;
  spec.dense_intermediate_size = c.Int("intermediate_size", 1);
}

void ImportOpt(const base::JsonReader& c, MoeModelSpec& spec) {
  spec.num_layers = c.Count("num_hidden_layers", 1, base::kMaxLayers);
  spec.hidden_size = c.Int("hidden_size", 1);
  spec.vocab_size = c.Int("vocab_size", 1);
  spec.tied_embeddings = c.Bool("tie_word_embeddings", true);
  spec.max_position_embeddings = c.Int("max_position_embeddings", 1);
  spec.norm = NormKind::kLayerNorm;
  spec.final_norm =
      c.Bool("do_layer_norm_before", true) && !c.Bool("_remove_final_layer_norm", false);
  const std::string activation = c.String("activation_function", "relu");
  if (activation == "relu") {
    spec.activation = Activation::kRelu;
  } else if (activation == "gelu") {
    spec.activation = Activation::kGelu;
  } else {
    c.Fail("activation_function", "\"relu\" or \"gelu\"");
  }
  spec.ffn_bias = c.Bool("enable_bias", true);
  spec.dense_intermediate_size = c.Int("ffn_dim", 1);
  AttentionSpec& a = spec.attention;
  a.num_heads = c.Int("num_attention_heads", 1);
  a.num_kv_heads = a.num_heads;
  a.head_dim = spec.hidden_size / a.num_heads;
  a.qkv_bias = a.out_bias = spec.ffn_bias;
  const int64_t projection = c.Int("word_embed_proj_dim", 1, spec.hidden_size);
  spec.word_embed_proj_dim = projection == spec.hidden_size ? 0 : projection;
  spec.learned_position_embeddings = true;
  spec.position_embedding_offset = 2;  // OPTLearnedPositionalEmbedding's fixed offset
}

const std::map<std::string, std::pair<std::string, Importer>>& Importers() {
  // model_type -> (moelab family, importer). The one place families are registered.
  static const std::map<std::string, std::pair<std::string, Importer>> importers = {
      {"mixtral", {"mixtral", ImportMixtral}},
      {"qwen2_moe", {"qwen2_moe", ImportQwen2Moe}},
      {"qwen3_moe", {"qwen3_moe", ImportQwen3Moe}},
      {"deepseek_v2", {"deepseek_v2", ImportDeepSeek}},
      {"deepseek_v3", {"deepseek_v3", ImportDeepSeek}},
      {"olmoe", {"olmoe", ImportOlmoe}},
      {"phimoe", {"phimoe", ImportPhiMoe}},
      {"dbrx", {"dbrx", ImportDbrx}},
      {"gpt_oss", {"gpt_oss", ImportGptOss}},
      {"llama", {"llama", ImportLlama}},
      {"qwen2", {"qwen2", ImportQwen2}},
      {"opt", {"opt", ImportOpt}},
  };
  return importers;
}

}  // namespace

std::vector<std::string> SupportedHuggingFaceModelTypes() {
  std::vector<std::string> types;
  for (const auto& [type, importer] : Importers()) types.push_back(type);
  return types;
}

MoeModelSpec ImportHuggingFaceConfig(const nlohmann::json& config, const std::string& origin) {
  const base::JsonReader reader(config, origin);
  const std::string model_type = reader.String("model_type");
  const auto it = Importers().find(model_type);
  if (it == Importers().end()) {
    std::string expected = "one of";
    for (const std::string& type : SupportedHuggingFaceModelTypes())
      expected += " \"" + type + "\"";
    reader.Fail("model_type", expected);
  }
  MoeModelSpec spec;
  spec.name = std::filesystem::path(origin).stem().string();
  if (spec.name == "config")
    spec.name = std::filesystem::path(origin).parent_path().filename().string();
  spec.display_name = spec.name;
  spec.family = it->second.first;
  spec.hf_repo = reader.String("_name_or_path", "");
  it->second.second(reader, spec);
  ImportQuantization(reader, spec);
  ValidateModelSpec(spec, origin);
  return spec;
}

}  // namespace moelab::model
