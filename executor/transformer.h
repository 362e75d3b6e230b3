#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/execution_timeline.h"
#include "executor/expert_provider.h"
#include "executor/forward_model.h"
#include "executor/kv_cache.h"
#include "executor/weights.h"
#include "kernels/elementwise.h"
#include "kernels/expert_ffn.h"
#include "kernels/thread_pool.h"
#include "routing/routing_source.h"
#include "routing/routing_trace.h"

namespace moelab::executor {

class ExpertParallel;
class TensorParallelAttention;

// The reference MoE transformer: embeddings, RMSNorm, rotary embeddings, grouped-query attention
// over per-sequence KV caches, a softmax top-K router (renormalized when the family does), SwiGLU
// experts, shared experts, final norm, LM head. Every token's result depends only on its own
// sequence (never on the other sequences of the batch or on how many tokens a pass carries), so
// speculative verification and plain decoding agree bit for bit.
class Transformer final : public ForwardModel {
 public:
  Transformer(const ModelWeights& weights, kernels::ThreadPool& pool);

  const ExecutorConfig& config() const override { return weights_.config; }
  const ModelWeights& weights() const { return weights_; }

  void Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
               std::vector<float>& logits) override;

  OperatorTimes& times() override { return times_; }
  void ReservePass(int64_t tokens) override;
  KvCache NewCache(int64_t capacity) const override { return KvCache(config(), capacity); }
  std::string device() const override { return "cpu"; }
  // Routed experts come from `provider` in every pass whose options name none (nullptr: from
  // ModelWeights); the offload runtime, so every workload runs offloaded unchanged.
  void set_expert_provider(ExpertProvider* provider) { provider_ = provider; }
  // Every pass adds its operators to `timeline` (nullptr: none): the pass, the embedding, each
  // layer's norms, attention and router ("dense layer L"), each expert's FFN, the LM head.
  void set_timeline(ExecutionTimeline* timeline) { timeline_ = timeline; }
  // Routed experts run across ranks (expert_parallel.h) in every pass (nullptr: here): each MoE
  // layer's tokens go to their experts' ranks and back; this model holds only its rank's experts.
  void set_expert_parallel(ExpertParallel* expert_parallel) { expert_parallel_ = expert_parallel; }
  // Attention split by heads across ranks (tensor_parallel_attention.h; nullptr: all heads here):
  // this model holds its rank's heads, every layer's partial output projection is summed over the
  // ranks before the residual add, and with expert parallelism each rank sends its share of the
  // tokens to the experts and the MoE outputs are gathered back.
  void set_tensor_parallel_attention(TensorParallelAttention* attention) {
    tensor_parallel_attention_ = attention;
  }
  int64_t passes() const override { return passes_; }

 private:
  void Attention(int64_t layer, std::vector<SequenceInput>& batch, int64_t tokens);
  // Rows [first_row, first_row + tokens) of normed_ through the layer's MoE into ffn_out_'s same
  // rows (first_row > 0 only across ranks: tensor-parallel attention's share).
  void MoeBlock(int64_t layer, int64_t first_row, int64_t tokens, const ForwardOptions& options,
                routing::RoutingStep* record);
  // The routed experts of this process (from ModelWeights or the provider) into ffn_out_.
  void RoutedExperts(int64_t layer, int64_t tokens, routing::RoutingStep* record);
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
  ExecutionTimeline* timeline_ = nullptr;
  ExpertParallel* expert_parallel_ = nullptr;
  TensorParallelAttention* tensor_parallel_attention_ = nullptr;
  std::chrono::steady_clock::time_point layer_start_;  // the current layer's, for the timeline
  void Record(ExecutionTimeline::Kind kind, int64_t layer, int64_t expert,
              std::chrono::steady_clock::time_point start) {
    if (timeline_) {
      timeline_->Add(kind, static_cast<int32_t>(layer), static_cast<int32_t>(expert),
                     ExecutionTimeline::kComputeLane, start, std::chrono::steady_clock::now());
    }
  }

  // Scratch reused across passes (no allocation once warm).
  std::vector<float> hidden_, normed_, qkv_, attention_out_, projected_, router_logits_, ffn_out_;
  std::vector<float> gathered_, expert_out_;
  // The offload path's expert outputs, one block of rows per expert in expert order (rows of
  // expert e from provided_row_[e]), so a pass's outputs fit in tokens x top_k rows.
  std::vector<float> provided_out_;
  std::vector<int64_t> provided_row_;
  std::vector<float> gate_mean_, next_scores_, next_logits_;
  std::vector<policies::ExpertDemand> demand_;
  std::vector<int32_t> run_order_;
  std::vector<int64_t> positions_;
  std::vector<std::vector<float>> scores_;  // per thread
  std::vector<std::vector<int32_t>> token_experts_;
  std::vector<std::vector<float>> token_weights_;
  kernels::ExpertFfnScratch ffn_scratch_;
};

}  // namespace moelab::executor
