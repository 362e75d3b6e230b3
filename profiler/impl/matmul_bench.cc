// router (hidden x experts) and lm_head (hidden x vocab): kernels/matmul.h MatmulBf16 on packed
// weights, the calls the executor makes (fp32 activations rounded to bf16 inside), weights cycled
// past 2 x the cache.
#include <algorithm>
#include <vector>

#include "kernels/matmul.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class MatmulBench : public OperatorBench {
 public:
  MatmulBench(const std::vector<GridPoint>& points, const BenchEnvironment& env)
      : pool_(*env.pool) {
    const executor::ExecutorConfig& c = *env.target;
    const bool router = points.front().family == OperatorFamily::kRouter;
    k_ = c.hidden_size;
    n_ = router ? c.num_experts : c.vocab_size;
    int64_t max_tokens = 1;
    for (const GridPoint& p : points) max_tokens = std::max(max_tokens, p.tokens);
    const int64_t block_bytes = 2 * k_ * n_;
    blocks_ = CyclingBlocks(block_bytes, env.cache_bytes);
    const std::string label = ToString(points.front().family) + " cpu";
    RequireMemory(static_cast<double>(blocks_ * block_bytes) +
                      4.0 * static_cast<double>(max_tokens * (k_ + n_)),
                  label + " weights and activations");
    std::vector<kernels::Bf16> rows(static_cast<size_t>(k_ * n_));
    FillWeights(rows.data(), static_cast<int64_t>(rows.size()));
    for (int64_t b = 0; b < blocks_; ++b)
      weights_.push_back(kernels::PackedBf16Matrix::Pack(rows.data(), n_, k_));
    x_.resize(static_cast<size_t>(max_tokens * k_));
    for (size_t i = 0; i < x_.size(); ++i)
      x_[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
    y_.resize(static_cast<size_t>(max_tokens * n_));
    // Every block read once, untimed, by the threads that read it in the timed calls: a thread's
    // first read of a freshly packed block is slow on a VM (ffn_bench.cc).
    for (const kernels::PackedBf16Matrix& w : weights_)
      kernels::MatmulBf16(x_.data(), 1, w, y_.data(), n_, pool_);
    notes_.push_back(CyclingNote(label, blocks_, block_bytes, env.cache_bytes));
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      for (auto _ : state) {
        kernels::MatmulBf16(x_.data(), point.tokens, weights_[next_], y_.data(), n_, pool_);
        benchmark::DoNotOptimize(y_.data());
        benchmark::ClobberMemory();
        next_ = (next_ + 1) % blocks_;
      }
    });
  }

 private:
  kernels::ThreadPool& pool_;
  int64_t k_ = 0;
  int64_t n_ = 0;
  int64_t blocks_ = 1;
  int64_t next_ = 0;
  std::vector<kernels::PackedBf16Matrix> weights_;
  std::vector<float> x_, y_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeMatmulBench(const std::vector<GridPoint>& points,
                                               const BenchEnvironment& env) {
  return std::make_unique<MatmulBench>(points, env);
}

}  // namespace moelab::profiler::impl
