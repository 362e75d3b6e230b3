#pragma once

#include <filesystem>

#include "executor/weights.h"

namespace moelab::executor {

// Hugging Face safetensors weights with the families' own tensor names:
//   mixtral            model.layers.L.block_sparse_moe.{gate, experts.E.w1 (gate), w3 (up), w2
//   (down)} qwen2_moe/qwen3_moe model.layers.L.mlp.{gate, experts.E.{gate,up,down}_proj,
//                      shared_expert.{gate,up,down}_proj, shared_expert_gate}
//   llama, qwen2       model.layers.L.mlp.{gate,up,down}_proj
// plus model.embed_tokens, model.norm, lm_head (absent when tied), and per layer
// input_layernorm, post_attention_layernorm, self_attn.{q,k,v,o}_proj (+ q/k/v biases,
// q_norm/k_norm where the family has them). A missing tensor, a wrong shape or a corrupt file is
// an error naming the file and the tensor.
ModelWeights LoadHuggingFaceWeights(const ExecutorConfig& config,
                                    const std::filesystem::path& file_or_folder);

// Writes weights under the same names (bf16 matrices, fp32 norms and biases), atomically.
void SaveHuggingFaceWeights(const ModelWeights& weights, const std::filesystem::path& file);

}  // namespace moelab::executor
