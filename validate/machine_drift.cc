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

namespace {

// The median wall time of `passes` calls of pass(i).
template <typename Pass>
double MedianSeconds(int passes, const char* what, Pass pass) {
  if (passes < 1) throw base::Error(std::string(what) + " needs at least one pass");
  using Clock = std::chrono::steady_clock;
  std::vector<double> times;
  for (int i = 0; i < passes; ++i) {
    const Clock::time_point start = Clock::now();
    pass(i);
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return Quantile(std::move(times), 0.5);
}

// An anchor's drift: median(rounds) / mean(profile) and the rounds' (max - min) / median.
// Error when a time is not positive.
struct AnchorDrift {
  double factor = 1.0;
  double scatter = 0;
  bool one_sided = false;  // every round's time on the same side of the profile's mean
};
AnchorDrift DriftOf(const std::vector<double>& profile_s, const std::vector<double>& rounds_s,
                    const std::string& anchor) {
  for (const std::vector<double>* times : {&profile_s, &rounds_s}) {
    for (double t : *times) {
      if (!(t > 0)) throw base::Error("machine drift: the " + anchor + "'s times must be positive");
    }
  }
  double profile_mean = 0;
  for (double t : profile_s) profile_mean += t / static_cast<double>(profile_s.size());
  const double rounds_median = Quantile(rounds_s, 0.5);
  const auto [min, max] = std::minmax_element(rounds_s.begin(), rounds_s.end());
  return {rounds_median / profile_mean, (*max - *min) / rounds_median,
          *min > profile_mean || *max < profile_mean};
}

}  // namespace

double SpeedAnchor::MeasureSeconds(int passes) {
  return MedianSeconds(passes, "the speed anchor", [&](int) {
    for (size_t b = 0; b < gate_up_.size(); ++b)
      kernels::ExpertFfn(x_.data(), 1, gate_up_[b], down_[b], out_.data(), pool_, scratch_);
  });
}

double SpeedAnchor::MeasureComputeSeconds(int passes) {
  return MedianSeconds(passes, "the compute anchor", [&](int pass) {
    const size_t b = static_cast<size_t>(pass) % gate_up_.size();
    kernels::ExpertFfn(x_.data(), kComputeTokens, gate_up_[b], down_[b], out_.data(), pool_,
                       scratch_);
  });
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
  const AnchorDrift memory = DriftOf(profile_s, rounds_s, "anchor");
  factor = memory.factor;
  scatter = memory.scatter;
  one_sided = memory.one_sided;
  applied = one_sided && std::fabs(factor - 1.0) > scatter;
  compute_measured = !compute_profile_s.empty() && !compute_rounds_s.empty();
  compute_factor = 1.0;
  compute_scatter = 0;
  if (!compute_measured) return;
  const AnchorDrift compute = DriftOf(compute_profile_s, compute_rounds_s, "compute anchor");
  compute_factor = compute.factor;
  compute_scatter = compute.scatter;
}

nlohmann::json MachineDrift::ToJson() const {
  nlohmann::json json = {
      {"anchor", anchor},
      {"measured", measured},
      {"profile_s", profile_s},
      {"rounds_s", rounds_s},
      {"factor", factor},
      {"scatter", scatter},
      {"one_sided", one_sided},
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
