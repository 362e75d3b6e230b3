#include "validate/machine_drift.h"

#include <algorithm>
#include <cmath>
#include <chrono>

#include "base/error.h"
#include "profiler/machine_info.h"
#include "profiler/profile_grid.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {

SpeedAnchor::SpeedAnchor(const executor::ExecutorConfig& target, kernels::ThreadPool& pool)
    : pool_(pool), hidden_(target.hidden_size), width_(target.expert_intermediate_size) {
  if (!target.is_moe()) throw base::Error("the speed anchor times the target's routed expert");
  const int64_t block_elements = 3 * hidden_ * width_;
  const int64_t blocks = profiler::CyclingBlocks(
      2 * block_elements, profiler::EffectiveCacheBytes(profiler::L3CacheBytes()));
  // Varied, exactly representable bf16 values; the contents do not change the work.
  std::vector<kernels::Bf16> rows(static_cast<size_t>(block_elements));
  for (int64_t i = 0; i < block_elements; ++i)
    rows[i] = kernels::FloatToBf16(static_cast<float>(i % 17 - 8) * 0.01f);
  for (int64_t b = 0; b < blocks; ++b) {
    gate_up_.push_back(kernels::PackedBf16Matrix::Pack(rows.data(), 2 * width_, hidden_));
    down_.push_back(
        kernels::PackedBf16Matrix::Pack(rows.data() + 2 * width_ * hidden_, hidden_, width_));
  }
  x_.assign(static_cast<size_t>(kComputeTokens * hidden_), 0.01f);
  out_.resize(x_.size());
}

double SpeedAnchor::MeasureSeconds(int passes) {
  if (passes < 1) throw base::Error("the speed anchor needs at least one pass");
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  for (int pass = 0; pass < passes; ++pass) {
    const Clock::time_point start = Clock::now();
    for (size_t b = 0; b < gate_up_.size(); ++b)
      kernels::ExpertFfn(x_.data(), 1, gate_up_[b], down_[b], out_.data(), pool_, scratch_);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Quantile(std::move(times), 0.5);
}

double SpeedAnchor::MeasureComputeSeconds(int passes) {
  if (passes < 1) throw base::Error("the compute anchor needs at least one pass");
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  for (int pass = 0; pass < passes; ++pass) {
    const size_t b = static_cast<size_t>(pass) % gate_up_.size();
    const Clock::time_point start = Clock::now();
    kernels::ExpertFfn(x_.data(), kComputeTokens, gate_up_[b], down_[b], out_.data(), pool_,
                       scratch_);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Quantile(std::move(times), 0.5);
}

std::string SpeedAnchor::DescribeCompute() const {
  return "expert FFN (hidden " + std::to_string(hidden_) + ", width " + std::to_string(width_) +
         ") at " + std::to_string(kComputeTokens) + " tokens, median of " +
         std::to_string(kComputePasses) + " calls";
}

std::string SpeedAnchor::Describe() const {
  return "expert FFN (hidden " + std::to_string(hidden_) + ", width " + std::to_string(width_) +
         ") at 1 token over " + std::to_string(gate_up_.size()) +
         " packed copies (from DRAM), median of " + std::to_string(kPasses) + " passes";
}

void MachineDrift::Compute() {
  measured = !profile_s.empty() && !rounds_s.empty();
  factor = 1.0;
  if (!measured) return;
  for (const std::vector<double>* times : {&profile_s, &rounds_s}) {
    for (double t : *times) {
      if (!(t > 0)) throw base::Error("machine drift: the anchor's times must be positive");
    }
  }
  double profile_mean = 0;
  for (double t : profile_s) profile_mean += t / static_cast<double>(profile_s.size());
  const double rounds_median = Quantile(rounds_s, 0.5);
  factor = rounds_median / profile_mean;
  scatter = (*std::max_element(rounds_s.begin(), rounds_s.end()) -
             *std::min_element(rounds_s.begin(), rounds_s.end())) /
            rounds_median;
  applied = std::fabs(factor - 1.0) > scatter;
  compute_measured = !compute_profile_s.empty() && !compute_rounds_s.empty();
  compute_factor = 1.0;
  compute_scatter = 0;
  if (!compute_measured) return;
  for (const std::vector<double>* times : {&compute_profile_s, &compute_rounds_s}) {
    for (double t : *times) {
      if (!(t > 0)) throw base::Error("machine drift: the compute anchor's times must be positive");
    }
  }
  double compute_profile_mean = 0;
  for (double t : compute_profile_s)
    compute_profile_mean += t / static_cast<double>(compute_profile_s.size());
  const double compute_median = Quantile(compute_rounds_s, 0.5);
  compute_factor = compute_median / compute_profile_mean;
  compute_scatter = (*std::max_element(compute_rounds_s.begin(), compute_rounds_s.end()) -
                     *std::min_element(compute_rounds_s.begin(), compute_rounds_s.end())) /
                    compute_median;
}

nlohmann::json MachineDrift::ToJson() const {
  nlohmann::json json = {
      {"anchor", anchor},
      {"measured", measured},
      {"profile_s", profile_s},
      {"rounds_s", rounds_s},
      {"factor", factor},
      {"scatter", scatter},
      {"applied", applied},
      {"applied_to",
       "predicted decode, beam and prefill times (SD speedups are ratios of times taken in "
       "the same run)"}};
  if (compute_measured) {
    json["compute"] = {{"anchor", compute_anchor},     {"profile_s", compute_profile_s},
                       {"rounds_s", compute_rounds_s}, {"factor", compute_factor},
                       {"scatter", compute_scatter},   {"applied", false}};
  }
  return json;
}

}  // namespace moelab::validate
