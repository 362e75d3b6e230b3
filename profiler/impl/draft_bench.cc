// draft_decode: the dense SD draft's whole one-token forward through the executor's Transformer
// (embedding, every layer's norms, attention and dense FFN, the final norm and the LM head), the
// pass the executor runs gamma times per SD round. The draft's operators are small (a few hundred
// microseconds each), so what the per-operator curves of the target leave out (norms, residual
// adds, the thread pool's per-operator dispatch, the attention and LM head at the draft's own
// shape) is a large share of its step; measuring the pass itself keeps them. Before each pass
// (untimed) a buffer of 2 x the cache is read on every thread, so the draft's weights come from
// DRAM as they do in an SD round, where the target's pass in between evicts them. Caches are filled
// to `context` positions directly and cut back after each pass; the sample is the pass's wall time.
// draft_decode_warm: an SD round's second and later draft passes, whose weights the pass before
// left partly in the caches: after the flush one untimed pass (the round's first), then
// kFollowingPasses timed ones, the sample their mean. Timed back to back instead, many passes after
// one another, the passes read 0.70-0.90 of draft_decode where a round's later passes ran about
// 0.87-0.92 of its first: in all eight validate --quick records of 2026-12-07 the draft step of
// gamma 2-4 measured 4-20 % (median about 10 %) over its price relative to gamma 1's. The caches
// keep more of a pass repeated many times than of one pass after a flush.
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

// The passes after a round's first that draft_decode_warm times: those of a gamma-4 round (validate
// --quick's largest gamma and `run --workload sd`'s default).
constexpr int kFollowingPasses = 3;

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
    const double flush_bytes = static_cast<double>(CacheEvictor::BytesFor(env.cache_bytes));
    RequireMemory(
        kv_bytes + executor::WeightBytesFor(draft) + flush_bytes,
        ToString(points.front().family) + " cpu KV caches, weights and cache-flush buffer");
    evictor_.emplace(env.cache_bytes);
    weights_ = std::make_unique<executor::ModelWeights>(
        executor::MakeSyntheticWeights(draft, env.seed, pool_));
    for (int64_t b = 0; b < max_batch; ++b)
      caches_.push_back(std::make_unique<executor::KvCache>(draft, positions));
    model_ = std::make_unique<executor::Transformer>(*weights_, pool_);
    notes_.push_back(ToString(points.front().family) +
                     " cpu: the whole one-token forward of the draft '" + draft.name + "' (" +
                     std::to_string(draft.num_layers) + " layers, hidden " +
                     std::to_string(draft.hidden_size) + ") through the executor; " +
                     "2 x the cache read before each pass, untimed" +
                     (warm_ ? ", then one untimed pass; the sample is the mean of the " +
                                  std::to_string(kFollowingPasses) + " passes after it"
                            : std::string()));
  }

  bool manual_time() const override { return true; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const std::vector<executor::SequenceInput> batch = Batch(point);
      for (auto _ : state) state.SetIterationTime(PassSeconds(point, batch));
    });
  }

  int64_t Iterations(const GridPoint& point) override {
    return FlushedIterations(min_time_s_, PassSeconds(point, Batch(point)));
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

  // One pass over caches of `point.context` positions after a flush, seconds of wall time; warm_:
  // the mean of the kFollowingPasses passes after that one.
  double PassSeconds(const GridPoint& point, const std::vector<executor::SequenceInput>& batch) {
    evictor_->EvictCaches(pool_);
    const double first_s = OnePass(point, batch);
    if (!warm_) return first_s;
    double following_s = 0;
    for (int pass = 0; pass < kFollowingPasses; ++pass) following_s += OnePass(point, batch);
    return following_s / kFollowingPasses;
  }

  double OnePass(const GridPoint& point, std::vector<executor::SequenceInput> batch) {
    for (int64_t b = 0; b < point.tokens; ++b) {
      caches_[b]->Truncate(0);
      caches_[b]->Append(point.context);
    }
    executor::ForwardOptions options;
    options.logits = executor::LogitRows::kLastPerSequence;
    const auto start = std::chrono::steady_clock::now();
    model_->Forward(batch, options, logits_);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  kernels::ThreadPool& pool_;
  double min_time_s_ = 0;
  bool warm_ = false;
  std::optional<CacheEvictor> evictor_;
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
