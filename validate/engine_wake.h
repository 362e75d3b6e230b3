#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/serving_simulator.h"

namespace moelab::validate {

// What the served engine pays on the first iteration after it had nothing to run, by how long it
// had nothing to run. On a 2-vCPU VM a lone prefill ran at the price of a prefill beside decodes
// after an idle gap under 0.1 s, and 5-20 ms, 16-33 ms and 30-64 ms over it (on about 100 ms)
// after 0.1-0.3, 0.3-0.6 and over 0.6 s (four records of 2026-12-06, their
// served-iterations.csv): the longer the engine's threads and the VM's vCPUs sleep, the slower
// the iteration that wakes them. It falls on the lone prefills of light load, where it was 10-20 %
// of the measured TTFT.
//
// The model: a factor 1 + w (1 - exp(-idle / tau)) on the woken iteration's price. A factor, not
// added seconds: on a tiny shape the composition over-prices, and a negative difference priced an
// iteration below zero. One magnitude w from every sample (the median of what each implies), the
// shape's time constant fixed (kTimeConstantS): grouped medians of 3 and of 5 samples fell and rose
// again with idle time by up to 0.9 (results/validate-serving-avx512bf16-2026-12-06-wake*). Each
// sample is taken relative to woken prefills after under kBaselineIdleS of idleness in the same
// measurement, so a slow stretch of the machine during it cancels: the five-sample record read
// 1.41 at 0.086 s against the with-prefill scale of a calibration minutes before.
struct EngineWake {
  // The woken iteration's time over its composed price after `idle_s` of idleness.
  struct Sample {
    double idle_s = 0, ratio = 1;
  };
  // tau: the judged runs' woken prefills of six records rose about linearly to 0.5 s of idleness
  // and by a further quarter of that to 1-1.5 s.
  static constexpr double kTimeConstantS = 0.4;
  static constexpr double kBaselineIdleS = 0.1;

  double magnitude = 0;  // w
  // Why the measurement left no magnitude (w = 0), when it did: a machine that ran the requests
  // much faster than predicted left no idle time under kBaselineIdleS.
  std::string not_measured;
  double baseline_ratio = 1;  // the median ratio after under kBaselineIdleS
  int64_t baseline_samples = 0, samples = 0;

  // Error: no sample under kBaselineIdleS or none at or above it, a negative or non-finite idle
  // time, a ratio that is not finite and > 0, a magnitude <= -1 (a factor that could reach 0).
  static EngineWake FromSamples(const std::vector<Sample>& samples);

  // 1 + w (1 - exp(-idle_s / tau)): 1 at 0 (an iteration that follows another without a gap wakes
  // nothing) and with no measurement (w = 0). Error: a negative or non-finite idle time.
  double Factor(double idle_s) const;

  // {magnitude, time_constant_s, baseline_ratio, baseline_idle_below_s, baseline_samples, samples}
  // and not_measured when set
  nlohmann::json ToJson() const;
};

// Another pricer's iterations, each multiplied by the wake at its replica's idle time: the time
// from that replica's last iteration's end to this one's start (a replica's first iteration
// follows an idleness longer than any measured).
class WakingPricer : public sim::IterationPricer {
 public:
  WakingPricer(sim::IterationPricer& inner, EngineWake wake);
  double Seconds(const scheduler::IterationPlan& plan) override;
  double SecondsOn(int64_t replica, double start_s, const scheduler::IterationPlan& plan) override;

 private:
  sim::IterationPricer& inner_;
  EngineWake wake_;
  std::vector<double> last_end_s_;  // per replica; -1: none yet
};

}  // namespace moelab::validate
