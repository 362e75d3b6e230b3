#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "executor/execution_timeline.h"
#include "executor/executor_config.h"
#include "executor/generation.h"
#include "executor/offload/expert_store.h"
#include "executor/offload/offload_runtime.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "policies/gate_signals.h"
#include "routing/routing_trace.h"
#include "policies/calibration.h"
#include "validate/validation_case.h"

namespace moelab::validate::impl {

// What both engines replay for one workload of `--cases offload`: the executor's gate routing,
// the calibration the policies start from, and the prompts.
struct Recorded {
  routing::RoutingTrace trace;
  std::string file;
  policies::RoutingCalibration calibration;
  std::vector<executor::TokenIds> prompts;
  std::shared_ptr<const policies::GateSignals> signals;  // [case]: filled by the first run
};

// The executor as the offload cases run it: one model and one store for every run.
struct Bench {
  executor::ExecutorConfig config;
  uint64_t seed = 1;
  kernels::ThreadPool* pool = nullptr;
  const executor::ModelWeights* weights = nullptr;
  const executor::offload::ExpertStore* store = nullptr;
  executor::Transformer* model = nullptr;  // shared by the runs, each with its own runtime
};

// One run of a case on the offload runtime.
struct OffloadRun {
  double value = 0;    // the case's quantity: TPOT or TTFT
  double total_s = 0;  // the whole run
  std::vector<double> decode_steps_s;
  executor::offload::OffloadStats stats;
  std::shared_ptr<executor::ExecutionTimeline> timeline;  // with --timelines
};

// One run of case `c` on the offload runtime over `bench`'s model and store, replaying
// `recorded`'s routing, or recording the gate's into `record` when given; with the run's timeline
// when `timeline`.
OffloadRun RunExecutor(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                       routing::RoutingTrace* record, bool timeline = false);

// A case's measured quantity over its runs: the median of the runs' values, or for a decode of
// three runs or more each step's median over the runs, summed, as the in-memory cases (the runs
// make the same decisions, so their steps are the same work); with the runs' min and max.
struct Measured {
  double value = 0, min = 0, max = 0;
  int runs = 0;
};
Measured MeasuredOf(const ValidationCase& c, const std::vector<OffloadRun>& runs);

}  // namespace moelab::validate::impl
