// norms_residual: what a transformer layer of the executor runs on the calling thread between its
// matmuls (executor/transformer.cc): the attention and FFN RMSNorms and the two residual adds, over
// `tokens` rows of the target's hidden size, with the executor's kernels (RmsNorm, AddTo). The rows
// stay in cache, as in the executor, where the previous operator has just written them.
#include <algorithm>
#include <vector>

#include "kernels/elementwise.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class NormsResidualBench : public OperatorBench {
 public:
  NormsResidualBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : hidden_size_(env.target->hidden_size), eps_(env.target->rms_norm_eps) {
    int64_t max_tokens = 1;
    for (const GridPoint& p : points) max_tokens = std::max(max_tokens, p.tokens);
    const size_t rows = static_cast<size_t>(max_tokens * hidden_size_);
    RequireMemory(4.0 * 4.0 * static_cast<double>(rows), "norms_residual cpu activations");
    hidden_.resize(rows);
    normed_.resize(rows);
    branch_.resize(rows);
    negated_branch_.resize(rows);
    for (size_t i = 0; i < rows; ++i) {
      hidden_[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
      branch_[i] = 0.001f * static_cast<float>(static_cast<int>(i % 7) - 3);
      negated_branch_[i] = -branch_[i];
    }
    attention_norm_.assign(static_cast<size_t>(hidden_size_), 1.0f);
    ffn_norm_.assign(static_cast<size_t>(hidden_size_), 0.5f);
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const int64_t t = point.tokens, values = point.tokens * hidden_size_;
      for (auto _ : state) {
        // The second add takes the first back out, so the residual stream keeps its magnitude
        // over millions of iterations (no overflow, no denormals) while doing the same work.
        kernels::RmsNorm(hidden_.data(), t, hidden_size_, attention_norm_.data(), eps_,
                         normed_.data());
        kernels::AddTo(branch_.data(), values, hidden_.data());
        kernels::RmsNorm(hidden_.data(), t, hidden_size_, ffn_norm_.data(), eps_, normed_.data());
        kernels::AddTo(negated_branch_.data(), values, hidden_.data());
        benchmark::DoNotOptimize(hidden_.data());
        benchmark::DoNotOptimize(normed_.data());
        benchmark::ClobberMemory();
      }
    });
  }

 private:
  int64_t hidden_size_;
  float eps_;
  std::vector<float> hidden_, normed_, branch_, negated_branch_, attention_norm_, ffn_norm_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeNormsResidualBench(const std::vector<GridPoint>& points,
                                                      const BenchEnvironment& env) {
  return std::make_unique<NormsResidualBench>(points, env);
}

}  // namespace moelab::profiler::impl
