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

double Shape(double idle_s) { return 1.0 - std::exp(-idle_s / EngineWake::kTimeConstantS); }

}  // namespace

EngineWake EngineWake::FromSamples(const std::vector<Sample>& samples) {
  std::vector<double> baseline;
  for (const Sample& sample : samples) {
    CheckIdle(sample.idle_s);
    if (!(sample.ratio > 0) || !std::isfinite(sample.ratio))
      throw base::Error("engine wake: a ratio of " + std::to_string(sample.ratio) + " after " +
                        std::to_string(sample.idle_s) + " s idle (expected a finite ratio > 0)");
    if (sample.idle_s < kBaselineIdleS) baseline.push_back(sample.ratio);
  }
  if (baseline.empty() || baseline.size() == samples.size())
    throw base::Error("engine wake: " + std::to_string(baseline.size()) + " of " +
                      std::to_string(samples.size()) + " woken iterations after under " +
                      std::to_string(kBaselineIdleS) +
                      " s idle; the measurement needs some on either side");
  EngineWake wake;
  wake.baseline_ratio = base::Median(baseline);
  wake.baseline_samples = static_cast<int64_t>(baseline.size());
  wake.samples = static_cast<int64_t>(samples.size());
  std::vector<double> magnitudes;
  for (const Sample& sample : samples) {
    if (sample.idle_s < kBaselineIdleS) continue;
    magnitudes.push_back((sample.ratio / wake.baseline_ratio - 1.0) / Shape(sample.idle_s));
  }
  wake.magnitude = base::Median(magnitudes);
  if (!(wake.magnitude > -1))
    throw base::Error("engine wake: woken iterations ran at " + std::to_string(1 + wake.magnitude) +
                      " of those after a short idle time (expected > 0: a noisy measurement)");
  return wake;
}

double EngineWake::Factor(double idle_s) const {
  CheckIdle(idle_s);
  return 1.0 + magnitude * Shape(idle_s);
}

nlohmann::json EngineWake::ToJson() const {
  nlohmann::json json = {{"magnitude", magnitude},
                         {"time_constant_s", kTimeConstantS},
                         {"baseline_ratio", baseline_ratio},
                         {"baseline_idle_below_s", kBaselineIdleS},
                         {"baseline_samples", baseline_samples},
                         {"samples", samples}};
  if (!not_measured.empty()) json["not_measured"] = not_measured;
  return json;
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

}  // namespace moelab::validate
