#pragma once

#include <cstdint>
#include <utility>
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
// of the measured TTFT. A factor on the iteration's price, not added seconds: on a tiny shape the
// composition over-prices, and a negative difference could price an iteration below zero.
struct EngineWake {
  // One wake measured: the idle seconds before the iteration and its time over its price.
  struct Sample {
    double idle_s = 0, ratio = 1;
  };
  // (idle seconds, ratio), idle increasing: each the median of a group of samples.
  std::vector<std::pair<double, double>> points;
  int64_t samples = 0;

  // Samples sorted by idle time in consecutive groups of `group` (the last takes the rest
  // when it would be smaller), each group's median idle and median ratio a point. Error: fewer
  // samples than one group, a group < 1, a negative or non-finite idle time, a ratio that is
  // not finite and > 0.
  static EngineWake FromSamples(std::vector<Sample> samples, int64_t group);

  // The factor on an iteration's price after `idle_s` of idleness: 1 at 0 (an iteration that
  // follows another without a gap wakes nothing), linear from (0, 1) to the first point and
  // between points, the last point's beyond it (a run's first iteration, after seconds of
  // idleness, takes the longest wake measured). 1 with no points. Error: a negative or
  // non-finite idle time.
  double Factor(double idle_s) const;

  nlohmann::json ToJson() const;  // {points: [{idle_s, ratio}], samples}
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
