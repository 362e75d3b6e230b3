// attention_decode, attention_verify and attention_prefill, measured through the executor's own
// Transformer so the code is exactly what `moelab run` executes: QKV projection, q/k norms and
// biases when the model has them, rotary embedding, the KV cache write, AttendOneHead per (token,
// head) on the thread pool, the output projection. The harness is the target's attention shape in a
// dense model whose FFN (width 1) and vocabulary (2) are negligible; the time is the Transformer's
// own attention_s (manual timing), so the embedding, norms, FFN and LM head of the harness are not
// counted.
//
// decode: L identical layers, L = CyclingBlocks(attention weight bytes, cache) capped at 64 and by
// a KV budget; caches are filled to `context` positions directly (their contents do not change the
// work), one token per sequence is decoded, the caches are cut back, and the sample is
// attention_s / L. Where a point's L layers of weights and KV are less than 2 x the cache (small
// batches and contexts: the KV budget caps L), the harness's weights and the KV rows the pass reads
// are flushed from every cache level (clflush) before each pass, untimed, so they come from DRAM
// as in a real decode step, where the layer's experts stream through the cache in between, while
// the activations and scratch a real pass has just written stay where they are. Reading a buffer
// of 2 x the cache instead evicted those too: on the Xeon a one-layer prefill of 48-160 tokens
// then took 7-9 % longer than a layer of a 16-layer pass with cold weights, and validate's
// attention predictions for prefills and SD verify passes ran 10-28 % over the executor's.
// verify: as decode, with `queries_per_sequence` new tokens per sequence (an SD verify pass): the
// executor runs one (token, head) task per query, each over its own sequence's cache, so a
// sequence's queries read the same K/V rows, mostly from cache after the first.
// prefill: one layer, one sequence of `tokens` prompt tokens into an empty cache; before each pass
// (untimed) the layer's weights are flushed so they come from DRAM.
#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "executor/kv_cache.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "profiler/impl/benches.h"
#include "profiler/machine_info.h"
#include "profiler/profile_grid.h"

namespace moelab::profiler::impl {
namespace {

constexpr int64_t kMaxHarnessLayers = 64;

class AttentionBench : public OperatorBench {
 public:
  AttentionBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : pool_(*env.pool),
        min_time_s_(env.spec->min_time_s),
        cached_(points.front().family != OperatorFamily::kAttentionPrefill) {
    const executor::ExecutorConfig& target = *env.target;
    int64_t max_context = 1;
    int64_t max_batch = 1;
    int64_t max_tokens = 1;
    int64_t max_queries = 1;
    for (const GridPoint& p : points) {
      max_context = std::max(max_context, p.context);
      max_batch = std::max(max_batch, p.tokens);
      max_tokens = std::max(max_tokens, p.tokens);
      max_queries = std::max(max_queries, p.queries_per_sequence);
    }
    const int64_t positions = max_context + max_queries;
    layer_weight_bytes_ = AttentionWeightBytes(target);
    const double layer_weight_bytes = layer_weight_bytes_;
    const std::string label = ToString(points.front().family) + " cpu";
    if (cached_) {
      const double kv_per_layer = static_cast<double>(max_batch) * static_cast<double>(positions) *
                                  static_cast<double>(target.kv_width()) * 8.0;
      const int64_t cycling =
          std::min(kMaxHarnessLayers,
                   CyclingBlocks(static_cast<int64_t>(layer_weight_bytes), env.cache_bytes));
      const double budget = std::min(4.0 * (1 << 30), 0.25 * AvailableMemoryBytes());
      const int64_t by_memory = std::max<int64_t>(1, static_cast<int64_t>(budget / kv_per_layer));
      layers_ = std::min(cycling, by_memory);
      const executor::ExecutorConfig config = AttentionHarnessConfig(target, layers_, positions);
      RequireMemory(kv_per_layer * static_cast<double>(layers_) + executor::WeightBytesFor(config),
                    label + " KV caches and weights");
      weights_ = std::make_unique<executor::ModelWeights>(
          executor::MakeSyntheticWeights(config, env.seed, pool_));
      for (int64_t b = 0; b < max_batch; ++b)
        caches_.push_back(std::make_unique<executor::KvCache>(config, positions));
      notes_.push_back(label + ": the executor's Transformer attention over " +
                       std::to_string(layers_) + " layers of the target's attention shape (" +
                       std::to_string(static_cast<int64_t>(layer_weight_bytes)) +
                       " weight bytes per layer); samples are attention time per layer");
      if (layers_ < cycling) {
        notes_.push_back(label + ": " + std::to_string(layers_) + " layers instead of " +
                         std::to_string(cycling) +
                         " (KV cache memory budget); points whose layers' weights and KV caches "
                         "are under 2 x the cache (" +
                         std::to_string(CacheEvictor::BytesFor(env.cache_bytes)) +
                         " bytes) have them flushed from the caches before each pass, untimed");
      }
    } else {
      layers_ = 1;
      const executor::ExecutorConfig config = AttentionHarnessConfig(target, 1, max_tokens);
      RequireMemory(executor::WeightBytesFor(config) + static_cast<double>(max_tokens) *
                                                           static_cast<double>(target.kv_width()) *
                                                           8.0,
                    label + " KV cache and weights");
      weights_ = std::make_unique<executor::ModelWeights>(
          executor::MakeSyntheticWeights(config, env.seed, pool_));
      caches_.push_back(std::make_unique<executor::KvCache>(config, max_tokens));
      notes_.push_back(
          label +
          ": the executor's Transformer attention, one layer; its weights flushed from "
          "the caches before each pass, untimed, so they come from DRAM");
    }
    flush_threshold_bytes_ = CacheEvictor::BytesFor(env.cache_bytes);
    model_ = std::make_unique<executor::Transformer>(*weights_, pool_);
  }

  bool manual_time() const override { return true; }
  double time_scale() const override { return 1.0 / static_cast<double>(layers_); }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      Pass pass(*this, point);
      for (auto _ : state) state.SetIterationTime(pass.Seconds());
    });
  }

  int64_t Iterations(const GridPoint& point) override {
    Pass pass(*this, point);
    return pass.flushes() ? FlushedIterations(min_time_s_, pass.Seconds()) : 0;
  }

 private:
  // One measured pass of `point`, repeatable: decode and verify (`queries_per_sequence` tokens per
  // cached sequence, the caches cut back after it) or prefill (a prompt into an emptied cache),
  // the caches flushed before it where the point needs that.
  class Pass {
   public:
    Pass(AttentionBench& bench, const GridPoint& point) : bench_(bench), point_(point) {
      const int64_t sequences = bench.cached_ ? point.tokens : 1;
      batch_.resize(static_cast<size_t>(sequences));
      for (int64_t b = 0; b < sequences; ++b) {
        if (bench.cached_) SetCacheLength(*bench.caches_[b], point.context);
        batch_[b].cache = bench.caches_[b].get();
        batch_[b].tokens.assign(
            static_cast<size_t>(bench.cached_ ? point.queries_per_sequence : point.tokens), 1);
      }
      options_.logits = executor::LogitRows::kLastPerSequence;
      if (!bench.cached_) options_.step_kind = "prefill";
      const double kv_bytes_per_layer =
          static_cast<double>(point.tokens) *
          static_cast<double>(point.context + point.queries_per_sequence) *
          static_cast<double>(bench.model_->config().kv_width()) * 8.0;
      flushes_ = !bench.cached_ || static_cast<double>(bench.layers_) *
                                           (bench.layer_weight_bytes_ + kv_bytes_per_layer) <
                                       static_cast<double>(bench.flush_threshold_bytes_);
    }
    bool flushes() const { return flushes_; }
    // The pass's attention time (all harness layers), seconds.
    double Seconds() {
      if (!bench_.cached_) bench_.caches_[0]->Truncate(0);
      if (flushes_) Flush();
      const double before = bench_.model_->times().attention_s;
      bench_.model_->Forward(batch_, options_, bench_.logits_);
      const double seconds = bench_.model_->times().attention_s - before;
      if (bench_.cached_) {
        for (size_t b = 0; b < batch_.size(); ++b) bench_.caches_[b]->Truncate(point_.context);
      }
      return seconds;
    }

   private:
    // The harness's attention weights and, for a cached pass, the KV rows it reads: what a real
    // pass finds in DRAM. Not the activations or scratch, which a real pass has just written.
    void Flush() const {
      for (const executor::LayerWeights& layer : bench_.weights_->layers) {
        FlushFromCaches(layer.qkv.Storage());
        FlushFromCaches(layer.output.Storage());
      }
      if (!bench_.cached_) return;
      const int64_t kv_width = bench_.model_->config().kv_width();
      const size_t row_bytes = static_cast<size_t>(point_.context * kv_width) * sizeof(float);
      for (const executor::SequenceInput& s : batch_) {
        for (int64_t layer = 0; layer < bench_.layers_; ++layer) {
          FlushFromCaches(
              std::as_bytes(std::span(s.cache->keys(layer), row_bytes / sizeof(float))));
          FlushFromCaches(
              std::as_bytes(std::span(s.cache->values(layer), row_bytes / sizeof(float))));
        }
      }
    }

    AttentionBench& bench_;
    const GridPoint& point_;
    std::vector<executor::SequenceInput> batch_;
    executor::ForwardOptions options_;
    bool flushes_ = false;
  };

  kernels::ThreadPool& pool_;
  double min_time_s_ = 0;
  bool cached_;  // decode or verify (sequences over a filled cache), not prefill
  int64_t layers_ = 1;
  double layer_weight_bytes_ = 0;
  std::unique_ptr<executor::ModelWeights> weights_;  // before model_: the Transformer refers to it
  std::unique_ptr<executor::Transformer> model_;
  std::vector<std::unique_ptr<executor::KvCache>> caches_;
  int64_t flush_threshold_bytes_ = 0;  // a pass whose weights and KV are under this flushes them
  std::vector<float> logits_;
};

}  // namespace

executor::ExecutorConfig AttentionHarnessConfig(const executor::ExecutorConfig& target,
                                                int64_t layers, int64_t max_positions) {
  executor::ExecutorConfig h = target;
  h.name = target.name + " attention harness";
  h.num_layers = layers;
  h.vocab_size = 2;
  h.tied_embeddings = true;
  h.num_experts = 0;
  h.top_k = 0;
  h.expert_intermediate_size = 0;
  h.num_shared_experts = 0;
  h.shared_expert_intermediate_size = 0;
  h.shared_expert_gate = false;
  h.first_dense_layers = 0;
  h.dense_intermediate_size = 1;
  h.max_positions = max_positions;
  h.Validate();
  return h;
}

void SetCacheLength(executor::KvCache& cache, int64_t length) {
  if (cache.length() > length) {
    cache.Truncate(length);
  } else if (cache.length() < length) {
    cache.Append(length - cache.length());
  }
}

std::unique_ptr<OperatorBench> MakeAttentionBench(const std::vector<GridPoint>& points,
                                                  const BenchEnvironment& env) {
  return std::make_unique<AttentionBench>(points, env);
}

}  // namespace moelab::profiler::impl
