#include "validate/engine_wake.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "base/error.h"
#include "base/stats.h"

namespace moelab::validate {
namespace {

void CheckIdle(double idle_s) {
  if (!(idle_s >= 0) || !std::isfinite(idle_s))
    throw base::Error("engine wake: idle time " + std::to_string(idle_s) +
                      " s (expected a finite time >= 0)");
}

}  // namespace

EngineWake EngineWake::FromSamples(std::vector<Sample> samples, int64_t group) {
  if (group < 1)
    throw base::Error("engine wake: a group of " + std::to_string(group) + " samples (at least 1)");
  if (static_cast<int64_t>(samples.size()) < group)
    throw base::Error("engine wake: " + std::to_string(samples.size()) +
                      " wakes measured, fewer than one group of " + std::to_string(group));
  for (const Sample& sample : samples) {
    CheckIdle(sample.idle_s);
    if (!(sample.ratio > 0) || !std::isfinite(sample.ratio))
      throw base::Error("engine wake: a ratio of " + std::to_string(sample.ratio) + " after " +
                        std::to_string(sample.idle_s) + " s idle (expected a finite ratio > 0)");
  }
  std::sort(samples.begin(), samples.end(),
            [](const Sample& a, const Sample& b) { return a.idle_s < b.idle_s; });
  EngineWake wake;
  wake.samples = static_cast<int64_t>(samples.size());
  const size_t size = samples.size(), step = static_cast<size_t>(group);
  for (size_t first = 0; first < size;) {
    // A remainder smaller than a group joins the last one.
    const size_t last = size - first < 2 * step ? size : first + step;
    std::vector<double> idle, ratio;
    for (size_t i = first; i < last; ++i) {
      idle.push_back(samples[i].idle_s);
      ratio.push_back(samples[i].ratio);
    }
    wake.points.emplace_back(base::Median(idle), base::Median(ratio));
    first = last;
  }
  return wake;
}

double EngineWake::Factor(double idle_s) const {
  CheckIdle(idle_s);
  if (points.empty() || idle_s == 0) return 1;
  double idle_before = 0, ratio_before = 1;
  for (const auto& [idle, ratio] : points) {
    if (idle_s <= idle) {
      // Two groups can share a median idle time: the first one's ratio there.
      if (idle == idle_before) return ratio;
      return ratio_before + (ratio - ratio_before) * (idle_s - idle_before) / (idle - idle_before);
    }
    idle_before = idle;
    ratio_before = ratio;
  }
  return points.back().second;
}

WakingPricer::WakingPricer(sim::IterationPricer& inner, EngineWake wake)
    : inner_(inner), wake_(std::move(wake)) {}

double WakingPricer::Seconds(const scheduler::IterationPlan& plan) { return inner_.Seconds(plan); }

double WakingPricer::SecondsOn(int64_t replica, double start_s,
                               const scheduler::IterationPlan& plan) {
  if (replica < 0) throw base::Error("engine wake: replica " + std::to_string(replica));
  const size_t index = static_cast<size_t>(replica);
  if (index >= last_end_s_.size()) last_end_s_.resize(index + 1, -1);
  const double idle_s = last_end_s_[index] < 0 ? std::numeric_limits<double>::max()
                                               : std::max(0.0, start_s - last_end_s_[index]);
  const double seconds = inner_.SecondsOn(replica, start_s, plan) * wake_.Factor(idle_s);
  last_end_s_[index] = start_s + seconds;
  return seconds;
}

nlohmann::json EngineWake::ToJson() const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [idle, ratio] : points) out.push_back({{"idle_s", idle}, {"ratio", ratio}});
  return {{"points", out}, {"samples", samples}};
}

}  // namespace moelab::validate
