#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "executor/offload/expert_store.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "policies/gate_signals.h"
#include "validate/impl/offload_run.h"
#include "validate/run_validation.h"
#include "validate/validation_case.h"

namespace moelab::validate::impl {

// Pairs of reader passes (profiler::ProbeReaderPass) run after every case and before every round:
// one pass alone and one beside computation each, the order alternating. The disk here moves by a
// third within half a second, so the two bandwidths are compared pair by pair, not round by round.
inline constexpr int kReaderPairsPerCase = 2;
inline constexpr int kReaderPairsPerRound = 4;

// Everything the rounds of `--cases offload` share (validate/offload_cases.h OffloadValidation):
// the store, the weights, the recorded routing, the runs and probes so far.
struct OffloadState {
  ValidationRequest request;
  executor::ExecutorConfig target;
  std::vector<ValidationCase> cases;
  std::function<void(const std::string&)> say;
  mutable kernels::ThreadPool pool;  // runs the kernels; Judge only simulates
  executor::ModelWeights weights;
  // One model for every run, as a server keeps one (and as the in-memory cases' bench does): its
  // scratch buffers grow to the largest pass once, not in every run's prefill (a fresh model's
  // first 256-token pass page-faults megabytes of activations, ~1.7 us a page on this VM).
  std::unique_ptr<executor::Transformer> model;
  std::unique_ptr<executor::offload::ExpertStore> store;
  std::map<std::string, Recorded> recorded;
  std::vector<std::vector<OffloadRun>> runs;
  // Per workload, every routed expert in RAM (static-split over all layers: no read): the
  // computation the cases add reads to, measured in the same rounds. Reported, not judged.
  std::vector<ValidationCase> baselines;
  std::vector<std::vector<OffloadRun>> baseline_runs;
  std::vector<std::shared_ptr<const policies::GateSignals>> signals;  // [case]: the first run's
  std::vector<double> probes;  // storage read bandwidth, before and after every round
  // Bare preads, 1 and 2 in flight, before every round (ProbeBarePreads): reported.
  std::vector<double> bare_one, bare_two;
  // The executor's reader, alone and beside computation, pair by pair (ProbeReaderPass): the
  // bandwidths the simulator is given.
  std::vector<double> reader_alone, reader_beside_compute;
  // The LM head's rate beside those passes against alone, where measured (TimeReaderPass).
  std::vector<double> compute_rate_beside_reads;
  std::vector<std::string> notes;
  int rounds = 0;

  // The plan of `t`, its baselines, and a pool of request.threads (all cores when 0).
  OffloadState(const ValidationRequest& r, const executor::ExecutorConfig& t,
               std::function<void(const std::string&)> s);
  // `pairs` pairs of reader passes (kReaderPairsPerCase), appended to reader_alone,
  // reader_beside_compute and compute_rate_beside_reads.
  void ProbeReaderPairs(int pairs);
  Bench MakeBench() const;
};

}  // namespace moelab::validate::impl
