#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "policies/calibration.h"
#include "sim/offload_simulator.h"
#include "sim/serving_simulator.h"

namespace moelab::sim {

// Serving with offloaded experts (docs/serving-sim.md, "Offloading"): every replica runs the
// offload simulator's engine (sim/engine.h), one pass per serving iteration, so its expert cache,
// the policy's state and the copies and reads in flight carry over from iteration to iteration,
// and an idle replica's copies go on while no iteration runs. An iteration costs
//   compute(plan) + (engine pass - the same pass with every expert resident),
// where compute is the composition of serving_iteration_cost.h (or the SD pricer) with every
// expert resident, and the bracket is what offloading adds: the exposed waits for copies and
// storage reads, CPU-run experts against their accelerator time, a computation slowed by reads in
// flight. The engine's pass carries the iteration's T tokens as T rows at the sequences' mean
// context (the composition prices the mixed batch exactly; the engine prices the overlap) and
// tells the policy the iteration's sequences as requests 0..n-1, as the executor's offload runtime
// does ("serve" passes).
class OffloadIterationPricer : public IterationPricer {
 public:
  // `config`: the offload simulator's configuration with its cost sources applied
  // (plan::ApplyCostSources): model, hardware, policy and options, routing (not a trace: an
  // iteration's token count is the scheduler's), seed, accelerator memory, calibration.
  // `max_sequences` (the running limit) and `kv_tokens` (the KV budget) size the memory plan.
  // Error (naming the option) when the policy's plan does not fit.
  OffloadIterationPricer(std::unique_ptr<IterationPricer> compute, SimConfig config,
                         int64_t max_sequences, int64_t kv_tokens);
  ~OffloadIterationPricer() override;
  OffloadIterationPricer(const OffloadIterationPricer&) = delete;
  OffloadIterationPricer& operator=(const OffloadIterationPricer&) = delete;

  double Seconds(const scheduler::IterationPlan& plan) override;  // replica 0, never idle
  double SecondsOn(int64_t replica, double start_s, const scheduler::IterationPlan& plan) override;

  IterationPricer& compute() { return *compute_; }
  // Totals over the replicas: {"policy", "policy_options", "routing", "replicas", "iterations",
  // "offload_s" (the seconds offloading added, summed over iterations), "resident_s" (the
  // engine's passes with every expert resident), "hit_rate", "experts" {...}, "bytes"
  // {"host_to_accelerator_expert_weights", "storage_to_host"}, "memory" (replica 0's plan)}.
  nlohmann::json Summary();
  // Replica `replica`'s offload simulation so far (its decisions with SimConfig::record_decisions);
  // Error for a replica that never ran an iteration.
  const SimResult& ReplicaResult(int64_t replica);

 private:
  struct Replica;
  Replica& ReplicaAt(int64_t replica);

  std::unique_ptr<IterationPricer> compute_;
  SimConfig config_;
  policies::RoutingCalibration calibration_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  int64_t iterations_ = 0;
  double offload_s_ = 0, resident_s_ = 0;
};

}  // namespace moelab::sim
