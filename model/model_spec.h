#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace moelab::model {

// The architecture of a decoder-only (MoE or dense) language model: everything the cost model,
// the parameter count and the executor need, in the field's own terms. Schema "moelab.model/1"
// (docs/schemas.md); loaded from presets/models/*.json or imported from a Hugging Face config.

enum class AttentionKind { kGroupedQuery, kMultiHeadLatent };
enum class NormKind { kRmsNorm, kLayerNorm, kLayerNormNoBias };
enum class QkNorm { kNone, kPerHead, kFull };
enum class Activation { kSwiGlu, kRelu, kGelu };

struct AttentionSpec {
  AttentionKind kind = AttentionKind::kGroupedQuery;
  int64_t num_heads = 0;
  // Grouped-query attention (multi-head when num_kv_heads == num_heads).
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;
  bool out_bias = false;
  QkNorm qk_norm = QkNorm::kNone;
  int64_t sliding_window = 0;             // tokens; 0 = full attention
  bool sliding_window_alternate = false;  // gpt-oss: every other layer is windowed
  bool attention_sinks = false;           // gpt-oss: one learned logit per head
  // Multi-head latent attention (DeepSeek-V2/V3); q_lora_rank 0 means a plain q projection.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

struct MoeSpec {
  int64_t num_experts = 0;  // routed experts per MoE layer (E)
  int64_t top_k = 0;        // routed experts per token (K)
  int64_t expert_intermediate_size = 0;
  int64_t num_shared_experts = 0;
  int64_t shared_expert_intermediate_size = 0;  // width of one shared expert
  bool shared_expert_gate = false;              // Qwen-MoE: sigmoid gate, hidden x 1
  int64_t first_dense_layers = 0;               // DeepSeek first_k_dense_replace
  bool router_bias = false;
  bool router_score_bias = false;  // DeepSeek-V3 e_score_correction_bias
  bool norm_topk_prob = true;      // renormalize the top-K probabilities
};

// Bits per weight by part, so experts can be quantized more than attention (HQQ, MXFP4, FP8).
struct WeightBits {
  double attention = 16;
  double experts = 16;
  double shared_experts = 16;
  double dense_ffn = 16;
  double embeddings = 16;  // embeddings, LM head, positions
  double router = 16;
};

struct PublishedCounts {
  int64_t total_params = 0;
  int64_t active_params = 0;
  std::string source;
};

struct MoeModelSpec {
  std::string name;
  std::string display_name;
  std::string family;
  std::string hf_repo;

  int64_t num_layers = 0;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  bool tied_embeddings = false;
  bool lm_head_bias = false;  // PhiMoE
  int64_t max_position_embeddings = 0;
  NormKind norm = NormKind::kRmsNorm;
  bool final_norm = true;

  AttentionSpec attention;
  Activation activation = Activation::kSwiGlu;
  bool ffn_bias = false;
  int64_t dense_intermediate_size = 0;  // FFN width of dense layers (all layers of a dense model)
  std::optional<MoeSpec> moe;           // absent for a dense model

  // OPT-style extras.
  int64_t word_embed_proj_dim = 0;  // 0 = hidden_size (no projection)
  bool learned_position_embeddings = false;
  int64_t position_embedding_offset = 0;

  WeightBits bits;
  std::optional<PublishedCounts> published;

  bool is_moe() const { return moe.has_value(); }
  int64_t num_moe_layers() const { return moe ? num_layers - moe->first_dense_layers : 0; }
  int64_t num_dense_layers() const { return num_layers - num_moe_layers(); }
  int64_t embedding_dim() const {
    return word_embed_proj_dim > 0 ? word_embed_proj_dim : hidden_size;
  }
  // Sparsity rho = K / E (1 for a dense model).
  double sparsity() const;
};

// Parses and validates a "moelab.model/1" object. `origin` names the file in error messages.
MoeModelSpec ModelSpecFromJson(const nlohmann::json& json, const std::string& origin);
nlohmann::json ModelSpecToJson(const MoeModelSpec& spec);

// Refuses impossible specs (K > E, zero layers, ...) with a message naming origin and field.
void ValidateModelSpec(const MoeModelSpec& spec, const std::string& origin);

std::string ToString(AttentionKind kind);
std::string ToString(NormKind kind);
std::string ToString(QkNorm kind);
std::string ToString(Activation kind);

}  // namespace moelab::model
