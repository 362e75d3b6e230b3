// beam_selection: what a beam search step of the executor runs after its forward pass
// (executor/generation.cc): RankBeamCandidates over `tokens` beams' rows of logits of the target's
// vocabulary, keeping `tokens` candidates (the beam width). The logits stay in cache, as in the
// executor, where the LM head has just written them; they are seeded pseudo-random values, so the
// scan meets its candidates in no particular order, as with a model's logits.
#include <algorithm>
#include <vector>

#include "base/hash.h"
#include "executor/beam_selection.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class BeamSelectionBench : public OperatorBench {
 public:
  BeamSelectionBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : vocab_(env.target->vocab_size) {
    int64_t max_rows = 1;
    for (const GridPoint& p : points) max_rows = std::max(max_rows, p.tokens);
    const size_t values = static_cast<size_t>(max_rows * vocab_);
    RequireMemory(4.0 * static_cast<double>(values), "beam_selection cpu logits");
    logits_.resize(values);
    for (size_t i = 0; i < values; ++i) {
      // In [-8, 8): about the spread of the synthetic target's logits.
      logits_[i] = static_cast<float>(
          static_cast<double>(base::SplitMix64(i) >> 11) * 0x1.0p-53 * 16.0 - 8.0);
    }
    for (int64_t b = 0; b < max_rows; ++b)
      beam_log_probabilities_.push_back(-1.0 - 0.25 * static_cast<double>(b));
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const std::vector<double> beams(beam_log_probabilities_.begin(),
                                      beam_log_probabilities_.begin() + point.tokens);
      for (auto _ : state) {
        executor::RankBeamCandidates(logits_.data(), point.tokens, vocab_, beams, point.tokens,
                                     candidates_);
        benchmark::DoNotOptimize(candidates_.data());
        benchmark::ClobberMemory();
      }
    });
  }

 private:
  int64_t vocab_;
  std::vector<float> logits_;
  std::vector<double> beam_log_probabilities_;
  std::vector<executor::BeamCandidate> candidates_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeBeamSelectionBench(const std::vector<GridPoint>& points,
                                                      const BenchEnvironment& env) {
  return std::make_unique<BeamSelectionBench>(points, env);
}

}  // namespace moelab::profiler::impl
