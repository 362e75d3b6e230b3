#pragma once

#include <cstdint>

#include "model/model_spec.h"

namespace moelab::model {

// Parameter counts of a model, per part, from its architecture alone.
//
// Convention (docs/model.md): total = every weight including embeddings, positions and the LM head
// (counted once when tied). active = what one token's forward pass reads: total minus the routed
// experts a token does not use, i.e. total - moe_layers * (E - K) * params_per_expert. The
// embedding table is counted in full in both, as the published figures of Mixtral, Qwen and
// DeepSeek do.
struct ParameterCounts {
  // Per layer.
  int64_t attention_per_layer = 0;  // projections, biases, q/k norms, sinks
  int64_t norms_per_layer = 0;      // the two pre-attention/pre-FFN norms
  int64_t router_per_moe_layer = 0;
  int64_t params_per_expert = 0;
  int64_t shared_experts_per_moe_layer = 0;  // all shared experts and their gate
  int64_t dense_ffn_per_dense_layer = 0;
  // Whole model.
  int64_t embeddings = 0;   // token embedding table
  int64_t positions = 0;    // learned position embeddings
  int64_t projections = 0;  // OPT project_in / project_out
  int64_t lm_head = 0;      // 0 when tied to the embeddings
  int64_t final_norm = 0;

  int64_t attention = 0;  // all layers
  int64_t norms = 0;      // all layers plus the final norm
  int64_t routers = 0;
  int64_t routed_experts = 0;  // all layers, all experts
  int64_t shared_experts = 0;
  int64_t dense_ffn = 0;

  int64_t total = 0;
  int64_t active = 0;
  // DeepSeek's and gpt-oss's convention: the input embedding is a lookup, not counted as active
  // (a tied table is still the LM head, so it stays).
  int64_t active_excluding_input_embedding = 0;
};

ParameterCounts CountParameters(const MoeModelSpec& spec);

// Weight bytes of one routed expert at the spec's expert bits (rounded up to whole bytes).
int64_t ExpertBytes(const MoeModelSpec& spec);

struct WeightBytes {
  double attention = 0;       // per layer, incl. norms
  double router = 0;          // per MoE layer
  double expert = 0;          // one routed expert
  double shared_experts = 0;  // per MoE layer
  double dense_ffn = 0;       // per dense layer
  double embeddings = 0;      // embedding table (only the rows used are read in a forward pass)
  double lm_head = 0;         // read in full by every forward pass (the tied table when tied)
  double total = 0;           // every weight once
};

WeightBytes CountWeightBytes(const MoeModelSpec& spec);
// The same from `counts`, CountParameters(spec) counted already.
WeightBytes CountWeightBytes(const MoeModelSpec& spec, const ParameterCounts& counts);

// The bytes a run's forward passes cycle through in memory when `resident_experts` routed experts
// (summed over layers) are held there: every weight a pass reads but the routed experts
// (attention, routers, shared experts, dense FFNs, the LM head; not the embedding table, of which
// a pass reads a few rows), the resident experts, and `kv_bytes` of KV cache. Whether the weights
// stream from a cache or from DRAM depends on it (fit/profile_cost_source.h).
double PassWorkingSetBytes(const MoeModelSpec& spec, double resident_experts, double kv_bytes);

// Bytes of KV cache one token occupies across all layers, at `kv_bits` per element. MLA caches
// the compressed latent plus the rotary key (DeepSeek's inference layout).
int64_t KvCacheBytesPerToken(const MoeModelSpec& spec, double kv_bits = 16);

}  // namespace moelab::model
