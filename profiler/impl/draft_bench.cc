// draft_decode: the dense SD draft's whole one-token forward through the executor's Transformer
// (embedding, every layer's norms, attention and dense FFN, the final norm and the LM head), the
// pass the executor runs gamma times per SD round. The draft's operators are small (a few hundred
// microseconds each), so what the per-operator curves of the target leave out (norms, residual
// adds, the thread pool's per-operator dispatch, the attention and LM head at the draft's own
// shape) is a large share of its step; measuring the pass itself keeps them. Before each pass
// (untimed) a buffer of 2 x the cache is read on every thread, so the draft's weights come from
// DRAM as they do in an SD round, where the target's pass in between evicts them. Caches are filled
// to `context` positions directly and cut back after each pass; the sample is the pass's wall time.
// draft_decode_warm: the same pass with no flush, each right after the one before (an untimed one
// first): an SD round's second and later draft passes, whose weights the pass before left partly
// in the caches. Passes back to back also spare the flush, about 50 ms a pass here, which for up to
// 10 flushed passes a point had made the family cost a minute of a quick profile.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "executor/kv_cache.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class DraftBench : public OperatorBench {
 public:
  DraftBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : pool_(*env.pool),
        min_time_s_(env.spec->min_time_s),
        warm_(points.front().family == OperatorFamily::kDraftDecodeWarm) {
    const executor::ExecutorConfig& draft = *env.draft;
    int64_t max_context = 1, max_batch = 1;
    for (const GridPoint& p : points) {
      max_context = std::max(max_context, p.context);
      max_batch = std::max(max_batch, p.tokens);
    }
    const int64_t positions = max_context + 1;
    const double kv_bytes = static_cast<double>(max_batch) * static_cast<double>(positions) *
                            static_cast<double>(draft.kv_width()) * 8.0 *
                            static_cast<double>(draft.num_layers);
    // The flush buffer (2 x the cache, a GiB here) only where it is read: filling it took most of
    // the 3 s each point's bench costs to build.
    const double flush_bytes =
        warm_ ? 0.0 : static_cast<double>(CacheEvictor::BytesFor(env.cache_bytes));
    RequireMemory(kv_bytes + executor::WeightBytesFor(draft) + flush_bytes,
                  ToString(points.front().family) + " cpu KV caches, weights" +
                      (warm_ ? "" : " and cache-flush buffer"));
    if (!warm_) evictor_.emplace(env.cache_bytes);
    weights_ = std::make_unique<executor::ModelWeights>(
        executor::MakeSyntheticWeights(draft, env.seed, pool_));
    for (int64_t b = 0; b < max_batch; ++b)
      caches_.push_back(std::make_unique<executor::KvCache>(draft, positions));
    model_ = std::make_unique<executor::Transformer>(*weights_, pool_);
    notes_.push_back(ToString(points.front().family) +
                     " cpu: the whole one-token forward of the draft '" + draft.name + "' (" +
                     std::to_string(draft.num_layers) + " layers, hidden " +
                     std::to_string(draft.hidden_size) + ") through the executor; " +
                     (warm_ ? "passes back to back, each right after another"
                            : "2 x the cache read before each pass, untimed"));
  }

  bool manual_time() const override { return true; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const std::vector<executor::SequenceInput> batch = Batch(point);
      if (warm_) PassSeconds(point, batch);  // the first timed pass follows one of its own
      for (auto _ : state) state.SetIterationTime(PassSeconds(point, batch));
    });
  }

  int64_t Iterations(const GridPoint& point) override {
    const double pass_s = PassSeconds(point, Batch(point));
    if (!warm_ || !(pass_s > 0)) return FlushedIterations(min_time_s_, pass_s);
    return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(min_time_s_ / pass_s)), 1, 1000);
  }

 private:
  std::vector<executor::SequenceInput> Batch(const GridPoint& point) {
    std::vector<executor::SequenceInput> batch(static_cast<size_t>(point.tokens));
    for (int64_t b = 0; b < point.tokens; ++b) {
      batch[b].cache = caches_[b].get();
      batch[b].tokens.assign(1, 1);
    }
    return batch;
  }

  // One pass over caches of `point.context` positions after a flush (warm_: after the pass before,
  // no flush), seconds of wall time.
  double PassSeconds(const GridPoint& point, std::vector<executor::SequenceInput> batch) {
    for (int64_t b = 0; b < point.tokens; ++b) {
      caches_[b]->Truncate(0);
      caches_[b]->Append(point.context);
    }
    executor::ForwardOptions options;
    options.logits = executor::LogitRows::kLastPerSequence;
    if (evictor_) evictor_->EvictCaches(pool_);
    const auto start = std::chrono::steady_clock::now();
    model_->Forward(batch, options, logits_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  kernels::ThreadPool& pool_;
  double min_time_s_ = 0;
  bool warm_ = false;
  std::optional<CacheEvictor> evictor_;              // draft_decode only
  std::unique_ptr<executor::ModelWeights> weights_;  // before model_: the Transformer refers to it
  std::unique_ptr<executor::Transformer> model_;
  std::vector<std::unique_ptr<executor::KvCache>> caches_;
  std::vector<float> logits_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeDraftBench(const std::vector<GridPoint>& points,
                                              const BenchEnvironment& env) {
  return std::make_unique<DraftBench>(points, env);
}

}  // namespace moelab::profiler::impl
