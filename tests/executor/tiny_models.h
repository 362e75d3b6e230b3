#pragma once

#include <string>

#include "executor/executor_config.h"
#include "executor/run_workload.h"

namespace moelab::testing {

// Tiny shapes that exercise every feature: Mixtral-style (renormalized top-K), Qwen-MoE-style
// (shared expert with a sigmoid gate, q/k/v biases, no renormalization, a dense first layer),
// Qwen3-style (per-head q/k norms) and a dense Llama-style draft.
inline executor::ExecutorConfig TinyMixtral(int64_t vocab = 37) {
  executor::ExecutorConfig c;
  c.name = "tiny-mixtral";
  c.family = "mixtral";
  c.num_layers = 2;
  c.hidden_size = 48;
  c.vocab_size = vocab;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 12;
  c.num_experts = 6;
  c.top_k = 2;
  c.expert_intermediate_size = 40;
  c.max_positions = 128;
  c.rope_theta = 10000.0;
  return c;
}

inline executor::ExecutorConfig TinyQwenMoe(int64_t vocab = 37) {
  executor::ExecutorConfig c = TinyMixtral(vocab);
  c.name = "tiny-qwen-moe";
  c.family = "qwen2_moe";
  c.num_layers = 3;
  c.qkv_bias = true;
  c.norm_topk_prob = false;
  c.num_shared_experts = 1;
  c.shared_expert_intermediate_size = 56;
  c.shared_expert_gate = true;
  c.first_dense_layers = 1;
  c.dense_intermediate_size = 64;
  c.top_k = 3;
  return c;
}

inline executor::ExecutorConfig TinyQwen3Moe(int64_t vocab = 37) {
  executor::ExecutorConfig c = TinyMixtral(vocab);
  c.name = "tiny-qwen3-moe";
  c.family = "qwen3_moe";
  c.qk_norm = true;
  c.sliding_window = 5;
  return c;
}

inline executor::ExecutorConfig TinyLlama(int64_t vocab = 37) {
  executor::ExecutorConfig c;
  c.name = "tiny-llama";
  c.family = "llama";
  c.num_layers = 2;
  c.hidden_size = 32;
  c.vocab_size = vocab;
  c.tied_embeddings = true;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.dense_intermediate_size = 64;
  c.max_positions = 128;
  c.rope_theta = 10000.0;
  return c;
}

// The same shapes with block-quantized experts and attention (kernels/quantized_matrix.h).
inline executor::ExecutorConfig Quantized(executor::ExecutorConfig c, kernels::WeightFormat experts,
                                          kernels::WeightFormat attention) {
  c.name += "-" + ToString(experts) + "-experts-" + ToString(attention) + "-attention";
  c.expert_format = experts;
  c.attention_format = attention;
  return c;
}

// Names parameterized tests after the tiny model ('-' becomes '_', as gtest requires).
struct TinyModelName {
  template <typename Info>
  std::string operator()(const Info& info) const {
    std::string name = info.param.name;
    for (char& ch : name) {
      if (ch == '-') ch = '_';
    }
    return name;
  }
};

// A `moelab run` of the default shape cut to 2 layers of hidden 256 (16 experts of 0.8 MB),
// 8 + 4 tokens: small enough for a unit test, the default model's every feature.
inline executor::RunRequest SmallRunRequest() {
  executor::RunRequest request;
  request.shape = model::DefaultTargetShape();
  request.shape.layers = 2;
  request.shape.hidden = 256;
  request.shape.intermediate = 512;
  request.prompt_tokens = 8;
  request.output_tokens = 4;
  return request;
}

}  // namespace moelab::testing
