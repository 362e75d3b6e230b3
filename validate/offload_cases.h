#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "validate/run_validation.h"
#include "validate/validation_case.h"

namespace moelab::validate {

namespace impl {
struct OffloadState;  // validate/impl/offload_state.h
}  // namespace impl

// `moelab validate --cases offload`: the offload simulator judged against the executor's offload
// runtime (executor/offload/) on this machine. Every policy the CPU-only executor runs x three
// expert budgets (a quarter, half and three quarters of the routed experts) x (decode batch 1,
// decode batch 4, prefill 256). Both sides see the same thing: the executor's own gate routing
// recorded once per workload and replayed (so both make identical decisions,
// tests/executor/offload_same_decisions_test.cc), the same calibration (popularity, fMoE's maps),
// the executor's gate signals, and this machine as the simulator's hardware
// (StorageTierHardwareFromProfile: the profile's storage_read latency and limits, the read
// bandwidth of a storage probe at the executor's reader concurrency) with the fitted-profile cost
// source pricing compute.

inline const std::vector<std::string>& OffloadPolicies() {
  static const std::vector<std::string> policies = {"on-demand", "lru-prefetch", "static-split",
                                                    "fmoe", "stream-all"};
  return policies;
}

// The cases for `target` (kind kOffload for decode TPOT, kOffloadPrefill for prefill TTFT), in
// run order. Error when the model has too few routed experts for three distinct budgets.
std::vector<ValidationCase> OffloadPlan(const executor::ExecutorConfig& target);

// `--cases offload` in three steps, so that validate runs its rounds between the profile's: the
// constructor builds (or reuses) the expert store under request.work_dir / "offload-store" and
// records the routing; RunRound runs every case of OffloadPlan once (a prefill three times), the
// storage probed first; Judge simulates each case and appends one CaseResult per case (cost
// source "fitted-profile", routing the recorded trace), the ranking (offload_ranking.h) and its
// notes to `result` (Error when no round ran).
class OffloadValidation {
 public:
  OffloadValidation(const ValidationRequest& request, const executor::ExecutorConfig& target,
                    std::function<void(const std::string&)> say);
  ~OffloadValidation();
  OffloadValidation(const OffloadValidation&) = delete;
  OffloadValidation& operator=(const OffloadValidation&) = delete;

  void RunRound();
  void Judge(const fit::Profile& profile, const fit::LatencyFit& fit,
             ValidationResult& result) const;

 private:
  std::unique_ptr<impl::OffloadState> state_;
};

// The three steps with request.Repeats() rounds back to back.
void RunOffloadValidation(const ValidationRequest& request, const executor::ExecutorConfig& target,
                          const fit::Profile& profile, const fit::LatencyFit& fit,
                          const std::function<void(const std::string&)>& say,
                          ValidationResult& result);

}  // namespace moelab::validate
