// expert_ffn and dense_ffn on the CPU: kernels/expert_ffn.h on the weights as the executor stores
// them (experts in the target's expert format: bf16, q8_0 or q4_0; the draft's dense FFN in bf16),
// the call the executor makes for every expert and dense FFN, with its weights cycled over enough
// blocks that they come from DRAM; expert_ffn_working_set: the same call with the weights cycled
// over each point's working set (a whole number of experts), so small ones stay in the cache.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "kernels/expert_ffn.h"
#include "kernels/weight_matrix.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

class FfnBench : public OperatorBench {
 public:
  FfnBench(const std::vector<GridPoint>& points, const BenchEnvironment& env) : pool_(*env.pool) {
    const OperatorFamily family = points.front().family;
    const bool expert = family != OperatorFamily::kDenseFfn;
    const executor::ExecutorConfig& config = expert ? *env.target : *env.draft;
    hidden_ = config.hidden_size;
    width_ = expert ? config.expert_intermediate_size : config.dense_intermediate_size;
    int64_t max_tokens = 1;
    for (const GridPoint& p : points) max_tokens = std::max(max_tokens, p.tokens);
    const kernels::WeightFormat format =
        expert ? config.expert_format : kernels::WeightFormat::kBf16;
    const int64_t block_elements = 3 * hidden_ * width_;
    const int64_t block_bytes = static_cast<int64_t>(std::ceil(
        static_cast<double>(block_elements) * kernels::StoredBitsPerWeight(format) / 8.0));
    blocks_ = CyclingBlocks(block_bytes, env.cache_bytes);
    if (family == OperatorFamily::kExpertFfnWorkingSet) {
      blocks_ = 1;
      for (const GridPoint& p : points) {
        if (p.bytes < block_bytes || p.bytes % block_bytes != 0) {
          throw base::Error("operator bench: " + p.Label() + ": the working set is not a whole " +
                            "number of " + std::to_string(block_bytes) + "-byte experts");
        }
        blocks_ = std::max(blocks_, p.bytes / block_bytes);
      }
      block_bytes_ = block_bytes;
    }
    const std::string label =
        ToString(points.front().family) + " cpu (" + kernels::ToString(format) + ")";
    RequireMemory(static_cast<double>(blocks_ * block_bytes) +
                      8.0 * static_cast<double>(max_tokens * hidden_) +
                      12.0 * static_cast<double>(max_tokens * width_),
                  label + " weights and activations");
    std::vector<kernels::Bf16> rows(static_cast<size_t>(block_elements));
    FillWeights(rows.data(), block_elements);
    for (int64_t b = 0; b < blocks_; ++b) {
      gate_up_.emplace_back(format, 2 * width_, hidden_);
      gate_up_.back().PackRows(0, 2 * width_, rows.data());
      down_.emplace_back(format, hidden_, width_);
      down_.back().PackRows(0, hidden_, rows.data() + 2 * width_ * hidden_);
    }
    x_.resize(static_cast<size_t>(max_tokens * hidden_));
    for (size_t i = 0; i < x_.size(); ++i)
      x_[i] = 0.01f * static_cast<float>(static_cast<int>(i % 13) - 6);
    out_.resize(x_.size());
    // The bench is built again for every round (profiler.cc, MeasureRounds), so a scratch grown
    // inside the timed calls paid its first-touch page faults in every round: at 1,024 and 4,096
    // tokens a point runs once a repetition, and those faults (2.5-3 s per GiB on a
    // paravirtualized VM) made it 3-4x the kernel's time (118 against 39 ms at 1,024 x 1,024 x
    // 3,584). The executor reserves its scratch before timing (ForwardModel::ReservePass): so does
    // the bench, untimed.
    kernels::ReserveExpertFfnScratch(max_tokens, hidden_, width_, format, scratch_);
    // Each thread's first read of a freshly packed block ran 1.3-2x slower than its later ones on
    // a 2-vCPU EPYC VM (up to 35x in one validation's first round), whichever thread had packed
    // it; the executor's weights are long past that when a run is timed. One untimed call per
    // block reads every block on the threads that read it in the timed calls.
    for (int64_t b = 0; b < blocks_; ++b) {
      kernels::ExpertFfn(x_.data(), 1, gate_up_[b], down_[b], out_.data(), pool_, scratch_);
    }
    if (family == OperatorFamily::kExpertFfnWorkingSet) {
      notes_.push_back(label + ": weights cycled over each point's working set (" +
                       std::to_string(block_bytes) +
                       "-byte experts); the largest is the DRAM regime of expert_ffn");
    } else {
      notes_.push_back(CyclingNote(label, blocks_, block_bytes, env.cache_bytes));
    }
  }

  bool manual_time() const override { return false; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    // Every point cycles over its own working set; the others over all the blocks.
    const int64_t cycle = block_bytes_ > 0 ? point.bytes / block_bytes_ : blocks_;
    next_ %= cycle;
    RunGuarded(state, [&] {
      for (auto _ : state) {
        kernels::ExpertFfn(x_.data(), point.tokens, gate_up_[next_], down_[next_], out_.data(),
                           pool_, scratch_);
        benchmark::DoNotOptimize(out_.data());
        benchmark::ClobberMemory();
        next_ = (next_ + 1) % cycle;
      }
    });
  }

 private:
  kernels::ThreadPool& pool_;
  int64_t hidden_ = 0;
  int64_t width_ = 0;
  int64_t blocks_ = 1;
  int64_t block_bytes_ = 0;  // expert_ffn_working_set only: one expert's bytes
  int64_t next_ = 0;
  std::vector<kernels::WeightMatrix> gate_up_, down_;
  std::vector<float> x_, out_;
  kernels::ExpertFfnScratch scratch_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeFfnBench(const std::vector<GridPoint>& points,
                                            const BenchEnvironment& env) {
  return std::make_unique<FfnBench>(points, env);
}

}  // namespace moelab::profiler::impl
