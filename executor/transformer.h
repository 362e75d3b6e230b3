#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/expert_provider.h"
#include "executor/kv_cache.h"
#include "executor/weights.h"
#include "kernels/elementwise.h"
#include "kernels/expert_ffn.h"
#include "kernels/thread_pool.h"
#include "routing/routing_source.h"
#include "routing/routing_trace.h"

namespace moelab::executor {

// New tokens of one sequence for a forward pass: they take positions cache->length() onwards.
struct SequenceInput {
  KvCache* cache = nullptr;
  std::vector<int32_t> tokens;
};

// Wall time per operator class, accumulated over forward passes.
struct OperatorTimes {
  double attention_s = 0;  // QKV and output projections, rotary, attention over the KV cache
  double router_s = 0;     // gate matmul, softmax, top-K
  double experts_s = 0;    // routed experts, shared experts, dense FFNs
  double lm_head_s = 0;    // final norm and LM head
  double other_s = 0;      // embedding, norms, residual adds
  double total() const { return attention_s + router_s + experts_s + lm_head_s + other_s; }
  OperatorTimes& operator+=(const OperatorTimes& other);
};

enum class LogitRows { kAll, kLastPerSequence };

struct ForwardOptions {
  LogitRows logits = LogitRows::kAll;
  routing::RoutingSource* routing = nullptr;  // forced routing; nullptr: the model's own gate
  routing::RoutingTrace* record = nullptr;    // when set, this pass's routing is appended as a step
  std::string step_kind = "decode";
  // Routed experts' weights come from here (the offload runtime) instead of ModelWeights; it may
  // ask for the gate's mean probabilities and the speculative gate (layer l+1's router applied to
  // layer l's normalized hidden state), which `record` then records too.
  ExpertProvider* experts = nullptr;
};

// The reference MoE transformer: embeddings, RMSNorm, rotary embeddings, grouped-query attention
// over per-sequence KV caches, a softmax top-K router (renormalized when the family does), SwiGLU
// experts, shared experts, final norm, LM head. Every token's result depends only on its own
// sequence (never on the other sequences of the batch or on how many tokens a pass carries), so
// speculative verification and plain decoding agree bit for bit.
class Transformer {
 public:
  Transformer(const ModelWeights& weights, kernels::ThreadPool& pool);

  const ExecutorConfig& config() const { return weights_.config; }
  const ModelWeights& weights() const { return weights_; }

  // Appends every sequence's tokens to its cache and writes logits [rows][vocab] to `logits`.
  // Rows: every new token in batch order (kAll) or the last token of each sequence.
  void Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
               std::vector<float>& logits);

  OperatorTimes& times() { return times_; }
  // Routed experts come from `provider` in every pass whose options name none (nullptr: from
  // ModelWeights); the offload runtime, so every workload runs offloaded unchanged.
  void set_expert_provider(ExpertProvider* provider) { provider_ = provider; }
  // Forward passes run so far; forced routing uses it as the step index.
  int64_t passes() const { return passes_; }

 private:
  void Attention(int64_t layer, std::vector<SequenceInput>& batch, int64_t tokens);
  void MoeBlock(int64_t layer, int64_t tokens, const ForwardOptions& options,
                routing::RoutingStep* record);
  void Ffn(const FfnWeights& ffn, const float* x, int64_t tokens, float* out);
  // The routed experts through options.experts (the offload runtime); outputs added in expert
  // order per token, as without it, so results are bit-identical.
  void ProvidedExperts(int64_t layer, int64_t tokens, ExpertProvider& provider,
                       routing::RoutingStep* record);

  const ModelWeights& weights_;
  kernels::ThreadPool& pool_;
  kernels::RopeTable rope_;
  OperatorTimes times_;
  int64_t passes_ = 0;
  ExpertProvider* provider_ = nullptr;
  ExpertProvider* active_provider_ = nullptr;  // this pass's

  // Scratch reused across passes (no allocation once warm).
  std::vector<float> hidden_, normed_, qkv_, attention_out_, projected_, router_logits_, ffn_out_;
  std::vector<float> gathered_, expert_out_;
  std::vector<std::vector<float>> provided_out_;  // [expert]: the offload path's outputs
  std::vector<float> gate_mean_, next_scores_, next_logits_;
  std::vector<policies::ExpertDemand> demand_;
  std::vector<int32_t> run_order_;
  std::vector<int64_t> positions_;
  std::vector<std::vector<float>> scores_;  // per thread
  std::vector<std::vector<int32_t>> token_experts_;
  std::vector<std::vector<float>> token_weights_;
  kernels::ExpertFfnScratch ffn_scratch_;
};

// Top-K of a router's probabilities: the K largest (lower index first on ties), in rank order.
void TopK(const float* probabilities, int64_t count, int64_t k, int32_t* indices);

}  // namespace moelab::executor
