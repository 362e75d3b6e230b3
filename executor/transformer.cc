#include "executor/transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "executor/expert_parallel.h"
#include "executor/tensor_parallel_attention.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/scratch.h"
#include "base/error.h"

namespace moelab::executor {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

OperatorTimes& OperatorTimes::operator+=(const OperatorTimes& o) {
  attention_s += o.attention_s;
  router_s += o.router_s;
  experts_s += o.experts_s;
  lm_head_s += o.lm_head_s;
  other_s += o.other_s;
  return *this;
}

OperatorTimes OperatorTimes::Since(const OperatorTimes& earlier) const {
  return {attention_s - earlier.attention_s, router_s - earlier.router_s,
          experts_s - earlier.experts_s, lm_head_s - earlier.lm_head_s, other_s - earlier.other_s};
}

Transformer::Transformer(const ModelWeights& weights, kernels::ThreadPool& pool)
    : weights_(weights),
      pool_(pool),
      rope_(weights.config.head_dim, weights.config.max_positions, weights.config.rope_theta) {
  weights.config.Validate();
  scores_.resize(static_cast<size_t>(pool.size()));
  // One KV head's query heads' scores over every position (kernels::AttendHeadGroup).
  const int64_t group = weights.config.num_heads / weights.config.num_kv_heads;
  for (auto& s : scores_) s.resize(static_cast<size_t>(group * weights.config.max_positions));
}

void Transformer::ReservePass(int64_t tokens) {
  using kernels::GrowTouched;
  if (tokens < 1) throw base::Error("reserve a pass of " + std::to_string(tokens) + " tokens");
  const ExecutorConfig& c = config();
  const int64_t d = c.hidden_size;
  GrowTouched(hidden_, tokens * d);
  GrowTouched(normed_, tokens * d);
  GrowTouched(positions_, tokens);
  GrowTouched(qkv_, tokens * (c.q_width() + 2 * c.kv_width()));
  GrowTouched(attention_out_, tokens * c.q_width());
  GrowTouched(projected_, tokens * d);
  GrowTouched(ffn_out_, tokens * d);
  kernels::ReserveMatmulScratch(c.attention_format, tokens, d);
  kernels::ReserveMatmulScratch(c.attention_format, tokens, c.q_width());
  kernels::ReserveBf16MatmulScratch(tokens, d);  // router, shared expert gate, LM head
  if (c.is_moe()) {
    GrowTouched(router_logits_, tokens * c.num_experts);
    GrowTouched(next_logits_, tokens * c.num_experts);
    GrowTouched(gathered_, tokens * d);
    GrowTouched(expert_out_, tokens * d);
    GrowTouched(provided_out_, tokens * c.top_k * d);  // a pass's provider may come in options
    // An expert gets at most every token of the pass.
    kernels::ReserveExpertFfnScratch(tokens, d, c.expert_intermediate_size, c.expert_format,
                                     ffn_scratch_);
  }
  for (const LayerWeights& layer : weights_.layers) {
    for (const FfnWeights* ffn : {&layer.dense, &layer.shared}) {
      if (ffn->width > 0) {
        kernels::ReserveExpertFfnScratch(tokens, d, ffn->width, ffn->gate_up.format(),
                                         ffn_scratch_);
      }
    }
  }
}

void Transformer::Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
                          std::vector<float>& logits) {
  const ExecutorConfig& c = config();
  const int64_t d = c.hidden_size;
  const int64_t tokens = CheckForwardBatch(c, batch);
  for (const SequenceInput& s : batch) {
    if (s.cache->device_storage())
      throw base::Error("forward pass: the CPU model was given a device KV cache");
  }
  if (timeline_) timeline_->BeginPass(passes_);
  if (expert_parallel_) expert_parallel_->set_step_kind(options.step_kind);
  const Clock::time_point pass_start = Clock::now();
  Clock::time_point start = pass_start;
  hidden_.resize(static_cast<size_t>(tokens * d));
  normed_.resize(hidden_.size());
  positions_.resize(static_cast<size_t>(tokens));
  int64_t row = 0;
  for (const SequenceInput& s : batch) {
    for (size_t i = 0; i < s.tokens.size(); ++i, ++row) {
      const int32_t token = s.tokens[i];
      positions_[row] = s.cache->length() + static_cast<int64_t>(i);
      const kernels::Bf16* embedding = weights_.embedding.data() + static_cast<int64_t>(token) * d;
      for (int64_t j = 0; j < d; ++j) hidden_[row * d + j] = kernels::Bf16ToFloat(embedding[j]);
    }
  }
  times_.other_s += Since(start);
  Record(ExecutionTimeline::Kind::kEmbedding, -1, -1, start);

  routing::RoutingStep step = NewRoutingStep(options, batch, tokens);
  active_provider_ = options.experts ? options.experts : provider_;
  if (active_provider_)
    active_provider_->BeginPass(options.step_kind, tokens, static_cast<int64_t>(batch.size()));
  // The rows this rank runs the FFN half of each layer on: all, or with tensor-parallel attention
  // its share (the residual stream is reduce-scattered after attention and gathered after the FFN).
  const TensorParallelAttention::TokenShare share =
      tensor_parallel_attention_ ? tensor_parallel_attention_->ShareOf(tokens)
                                 : TensorParallelAttention::TokenShare{0, tokens};
  const int64_t share_rows = share.end - share.begin;
  ffn_out_.resize(hidden_.size());
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    layer_start_ = Clock::now();
    Attention(layer, batch, tokens);
    start = Clock::now();
    const LayerWeights& lw = weights_.layers[layer];
    kernels::RmsNorm(hidden_.data() + share.begin * d, share_rows, d, lw.ffn_norm.data(),
                     c.rms_norm_eps, normed_.data() + share.begin * d);
    times_.other_s += Since(start);
    if (c.IsMoeLayer(layer)) {
      MoeBlock(layer, share.begin, share_rows, options, options.record ? &step : nullptr);
    } else {
      start = Clock::now();
      Ffn(lw.dense, normed_.data() + share.begin * d, share_rows,
          ffn_out_.data() + share.begin * d);
      times_.experts_s += Since(start);
      Record(ExecutionTimeline::Kind::kDense, layer, -1, layer_start_);
    }
    start = Clock::now();
    kernels::AddTo(ffn_out_.data() + share.begin * d, share_rows * d,
                   hidden_.data() + share.begin * d);
    times_.other_s += Since(start);
    if (tensor_parallel_attention_)
      tensor_parallel_attention_->GatherRows(hidden_.data(), tokens, d);
  }
  for (SequenceInput& s : batch) s.cache->Append(static_cast<int64_t>(s.tokens.size()));

  start = Clock::now();
  const std::vector<int64_t> rows = LogitRowIndices(batch, options.logits, tokens);
  const int64_t logit_rows = static_cast<int64_t>(rows.size());
  for (int64_t r = 0; r < logit_rows; ++r) {
    kernels::RmsNorm(hidden_.data() + rows[r] * d, 1, d, weights_.final_norm.data(), c.rms_norm_eps,
                     normed_.data() + r * d);
  }
  logits.resize(static_cast<size_t>(logit_rows * c.vocab_size));
  if (tensor_parallel_attention_) {
    // Vocabulary-parallel: this rank's LM head rows give its columns of the logits.
    const int64_t first_column = tensor_parallel_attention_->ShareOf(c.vocab_size).begin;
    kernels::MatmulBf16(normed_.data(), logit_rows, weights_.lm_head, logits.data() + first_column,
                        c.vocab_size, pool_);
    tensor_parallel_attention_->GatherColumns(logits.data(), logit_rows, c.vocab_size);
  } else {
    kernels::MatmulBf16(normed_.data(), logit_rows, weights_.lm_head, logits.data(), c.vocab_size,
                        pool_);
  }
  times_.lm_head_s += Since(start);
  Record(ExecutionTimeline::Kind::kLmHead, -1, -1, start);
  if (options.record) options.record->steps.push_back(std::move(step));
  if (active_provider_) active_provider_->EndPass();
  if (timeline_) {
    timeline_->Add(ExecutionTimeline::Kind::kPass, -1, -1, ExecutionTimeline::kPassLane, pass_start,
                   Clock::now());
  }
  ++passes_;
}

void Transformer::Attention(int64_t layer, std::vector<SequenceInput>& batch, int64_t tokens) {
  const ExecutorConfig& c = config();
  const LayerWeights& lw = weights_.layers[layer];
  const int64_t d = c.hidden_size;
  const int64_t hd = c.head_dim;
  const int64_t qkv_width = c.q_width() + 2 * c.kv_width();
  Clock::time_point start = Clock::now();
  kernels::RmsNorm(hidden_.data(), tokens, d, lw.attention_norm.data(), c.rms_norm_eps,
                   normed_.data());
  times_.other_s += Since(start);

  start = Clock::now();
  qkv_.resize(static_cast<size_t>(tokens * qkv_width));
  kernels::Matmul(normed_.data(), tokens, lw.qkv, qkv_.data(), qkv_width, pool_);
  // Bias, q/k norms, rotary embedding, then the new keys and values into each cache.
  int64_t row = 0;
  for (SequenceInput& s : batch) {
    float* keys = s.cache->keys(layer);
    float* values = s.cache->values(layer);
    for (size_t i = 0; i < s.tokens.size(); ++i, ++row) {
      float* q = qkv_.data() + row * qkv_width;
      float* k = q + c.q_width();
      float* v = k + c.kv_width();
      if (!lw.qkv_bias.empty()) {
        for (int64_t j = 0; j < qkv_width; ++j) q[j] += lw.qkv_bias[j];
      }
      if (!lw.q_norm.empty()) {
        kernels::RmsNorm(q, c.num_heads, hd, lw.q_norm.data(), c.rms_norm_eps, q);
        kernels::RmsNorm(k, c.num_kv_heads, hd, lw.k_norm.data(), c.rms_norm_eps, k);
      }
      rope_.Apply(q, c.num_heads, positions_[row]);
      rope_.Apply(k, c.num_kv_heads, positions_[row]);
      std::copy_n(k, c.kv_width(), keys + positions_[row] * c.kv_width());
      std::copy_n(v, c.kv_width(), values + positions_[row] * c.kv_width());
    }
  }
  // Each query sees its own sequence's cache up to its own position.
  attention_out_.resize(static_cast<size_t>(tokens * c.q_width()));
  std::vector<std::pair<KvCache*, int64_t>> token_cache(static_cast<size_t>(tokens));
  row = 0;
  for (SequenceInput& s : batch) {
    for (size_t i = 0; i < s.tokens.size(); ++i, ++row)
      token_cache[row] = {s.cache, positions_[row]};
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  const int64_t group = c.num_heads / c.num_kv_heads;
  // Tasks of whole (token, KV head) groups -- the query heads of a KV head read its cached rows
  // once -- few enough that small passes run on the caller alone.
  int64_t span = 0;
  for (const auto& [cache, position] : token_cache) span += position + 1;
  const int64_t work = span * c.num_heads * hd;
  const int64_t groups_total = tokens * c.num_kv_heads;
  const int64_t tasks = std::clamp<int64_t>(work >> 15, 1, groups_total);
  pool_.Run(tasks, [&](int64_t task_index, int thread) {
    for (int64_t task = task_index * groups_total / tasks;
         task < (task_index + 1) * groups_total / tasks; ++task) {
      const int64_t t = task / c.num_kv_heads;
      const int64_t kv_head = task % c.num_kv_heads;
      KvCache* cache = token_cache[t].first;
      const int64_t position = token_cache[t].second;
      const int64_t first =
          c.sliding_window > 0 ? std::max<int64_t>(0, position - c.sliding_window + 1) : 0;
      kernels::AttendHeadGroup(qkv_.data() + t * qkv_width + kv_head * group * hd, group,
                               cache->keys(layer) + kv_head * hd,
                               cache->values(layer) + kv_head * hd, c.kv_width(), hd, first,
                               position, scale, scores_[thread].data(),
                               attention_out_.data() + t * c.q_width() + kv_head * group * hd);
    }
  });
  projected_.resize(static_cast<size_t>(tokens * d));
  kernels::Matmul(attention_out_.data(), tokens, lw.output, projected_.data(), d, pool_);
  if (tensor_parallel_attention_) {
    // This rank's rows of the output projection summed over the ranks' heads, into the residual.
    tensor_parallel_attention_->ReduceScatterAdd(projected_.data(), tokens, d, hidden_.data());
    times_.attention_s += Since(start);
    return;
  }
  times_.attention_s += Since(start);
  start = Clock::now();
  kernels::AddTo(projected_.data(), tokens * d, hidden_.data());
  times_.other_s += Since(start);
}

void Transformer::Ffn(const FfnWeights& ffn, const float* x, int64_t tokens, float* out) {
  kernels::ExpertFfn(x, tokens, ffn.gate_up, ffn.down, out, pool_, ffn_scratch_);
}

void Transformer::MoeBlock(int64_t layer, int64_t first_row, int64_t tokens,
                           const ForwardOptions& options, routing::RoutingStep* record) {
  const ExecutorConfig& c = config();
  const LayerWeights& lw = weights_.layers[layer];
  const int64_t d = c.hidden_size;
  const int64_t experts = c.num_experts;
  const int64_t moe_layer = layer - c.first_dense_layers;
  const float* x = normed_.data() + first_row * d;
  float* out = ffn_out_.data() + first_row * d;
  if (first_row != 0 && !expert_parallel_)
    throw base::Error("MoE block: rows from " + std::to_string(first_row) + " need ranks (a bug)");

  Clock::time_point start = Clock::now();
  router_logits_.resize(static_cast<size_t>(tokens * experts));
  kernels::MatmulBf16(x, tokens, lw.router, router_logits_.data(), experts, pool_);
  token_experts_.resize(static_cast<size_t>(tokens));
  token_weights_.resize(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t)
    kernels::Softmax(router_logits_.data() + t * experts, experts);
  RouteLayer(c, router_logits_.data(), tokens, options, passes_, moe_layer, record, token_experts_,
             token_weights_);
  times_.router_s += Since(start);
  if (!active_provider_) Record(ExecutionTimeline::Kind::kDense, layer, -1, layer_start_);

  start = Clock::now();
  std::fill(out, out + tokens * d, 0.0f);
  if (expert_parallel_) {
    expert_parallel_->RunLayer(moe_layer, x, tokens, token_experts_, token_weights_, lw.experts,
                               out);
  } else {
    times_.experts_s += Since(start);
    RoutedExperts(layer, tokens, record);
    start = Clock::now();
  }
  if (lw.shared.width > 0) {
    expert_out_.resize(static_cast<size_t>(tokens * d));
    Ffn(lw.shared, x, tokens, expert_out_.data());
    std::vector<float> gate(static_cast<size_t>(tokens), 1.0f);
    if (!lw.shared_gate.empty()) {
      kernels::MatmulBf16(x, tokens, lw.shared_gate, gate.data(), 1, pool_);
      for (float& g : gate) g = 1.0f / (1.0f + std::exp(-g));
    }
    for (int64_t t = 0; t < tokens; ++t)
      kernels::Axpy(gate[t], expert_out_.data() + t * d, d, out + t * d);
  }
  times_.experts_s += Since(start);
}

void Transformer::RoutedExperts(int64_t layer, int64_t tokens, routing::RoutingStep* record) {
  const ExecutorConfig& c = config();
  const LayerWeights& lw = weights_.layers[layer];
  const int64_t d = c.hidden_size;
  const int64_t experts = c.num_experts;
  const int64_t k = c.top_k;
  const int64_t moe_layer = layer - c.first_dense_layers;
  Clock::time_point start = Clock::now();
  // Tokens of each expert, in token order; outputs added in expert order per token (fixed for a
  // token whatever else is in the batch).
  std::vector<std::vector<std::pair<int64_t, float>>> routed(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t j = 0; j < k; ++j)
      routed[token_experts_[t][j]].push_back({t, token_weights_[t][j]});
  }
  ExpertProvider* const provider = active_provider_;
  if (provider) {
    // Weights arrive from storage in the provider's order; the outputs are kept per expert and
    // added in expert order below, as in the loop without a provider.
    times_.experts_s += Since(start);
    ProvidedExperts(layer, tokens, *provider, record);
    start = Clock::now();
  }
  for (int64_t e = 0; e < experts; ++e) {
    const auto& assigned = routed[e];
    if (assigned.empty()) continue;
    const int64_t count = static_cast<int64_t>(assigned.size());
    if (!provider) {
      gathered_.resize(static_cast<size_t>(count * d));
      expert_out_.resize(gathered_.size());
      for (int64_t i = 0; i < count; ++i)
        std::copy_n(normed_.data() + assigned[i].first * d, d, gathered_.data() + i * d);
      const Clock::time_point expert_start = Clock::now();
      Ffn(lw.experts[e], gathered_.data(), count, expert_out_.data());
      Record(ExecutionTimeline::Kind::kExpert, moe_layer, e, expert_start);
    }
    const float* out = provider ? provided_out_.data() + provided_row_[e] * d : expert_out_.data();
    for (int64_t i = 0; i < count; ++i)
      kernels::Axpy(assigned[i].second, out + i * d, d, ffn_out_.data() + assigned[i].first * d);
  }
  times_.experts_s += Since(start);
}

void Transformer::ProvidedExperts(int64_t layer, int64_t tokens, ExpertProvider& provider,
                                  routing::RoutingStep* /*record*/) {
  const ExecutorConfig& c = config();
  const int64_t d = c.hidden_size;
  const int64_t experts = c.num_experts;
  const int32_t moe_layer = static_cast<int32_t>(layer - c.first_dense_layers);
  const policies::PolicyNeeds needs = provider.Needs();
  Clock::time_point start = Clock::now();
  // router_logits_ holds each token's softmax probabilities by now.
  std::vector<int64_t> counts(static_cast<size_t>(experts), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int32_t e : token_experts_[t]) ++counts[static_cast<size_t>(e)];
  }
  ExpertDemandOf(counts, demand_);
  gate_mean_.clear();
  if (needs.gate_probabilities) GateMeanOf(router_logits_.data(), tokens, experts, gate_mean_);
  // The speculative gate (Mixtral-offloading): the next layer's router on this layer's normalized
  // hidden state, softmax per token, summed over tokens.
  next_scores_.clear();
  if (needs.next_layer_scores && layer + 1 < c.num_layers) {
    next_logits_.resize(static_cast<size_t>(tokens * experts));
    kernels::MatmulBf16(normed_.data(), tokens, weights_.layers[layer + 1].router,
                        next_logits_.data(), experts, pool_);
    for (int64_t t = 0; t < tokens; ++t)
      kernels::Softmax(next_logits_.data() + t * experts, experts);
    NextLayerScoresOf(next_logits_.data(), tokens, experts, next_scores_);
  }
  times_.router_s += Since(start);
  Record(ExecutionTimeline::Kind::kDense, layer, -1, layer_start_);

  policies::LayerDemand demand;
  demand.layer = moe_layer;
  demand.tokens = tokens;
  demand.experts = demand_;
  demand.gate_probabilities = gate_mean_;
  demand.next_layer_scores = next_scores_;
  provider.PlanLayer(demand, run_order_);

  start = Clock::now();
  provided_row_.resize(static_cast<size_t>(experts));
  int64_t provided_rows = 0;
  for (int64_t e = 0; e < experts; ++e) {
    provided_row_[e] = provided_rows;
    provided_rows += counts[e];
  }
  if (static_cast<int64_t>(provided_out_.size()) < provided_rows * d)
    provided_out_.resize(static_cast<size_t>(provided_rows * d));
  for (int32_t e : run_order_) {
    std::vector<int64_t> rows;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int32_t chosen : token_experts_[t]) {
        if (chosen == e) rows.push_back(t);
      }
    }
    const int64_t count = static_cast<int64_t>(rows.size());
    gathered_.resize(static_cast<size_t>(count * d));
    for (int64_t i = 0; i < count; ++i)
      std::copy_n(normed_.data() + rows[i] * d, d, gathered_.data() + i * d);
    const FfnWeights& weights = provider.Acquire(moe_layer, e);
    const Clock::time_point expert_start = Clock::now();
    Ffn(weights, gathered_.data(), count, provided_out_.data() + provided_row_[e] * d);
    Record(ExecutionTimeline::Kind::kExpert, moe_layer, e, expert_start);
    provider.Release(moe_layer, e);
  }
  times_.experts_s += Since(start);
}

}  // namespace moelab::executor
