#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "executor/serving_core.h"

namespace moelab::executor {

// A request of an offline replay: submitted just before iteration `submit_before_iteration`
// (0: before the first).
struct ReplayArrival {
  ServingRequest request;
  int64_t submit_before_iteration = 0;
};

struct ReplayResult {
  // One plan per iteration, index = iteration (an iteration with nothing to run has an empty
  // batch), until every arrival was submitted and the scheduler is idle.
  std::vector<scheduler::IterationPlan> plans;
  std::map<int64_t, TokenIds> tokens;                  // generated tokens per admitted request
  std::map<int64_t, scheduler::AdmitResult> refusals;  // requests Submit refused
};

// The serving engine without HTTP or threads, iteration by iteration: the decisions it takes on
// these arrivals and the tokens it generates, for comparing with the serving simulator's
// decisions on the same arrivals and with plain greedy decoding. Arrivals are submitted in the
// order given among those due before the same iteration. Refuses (base::Error) more than
// `max_iterations` iterations (a scheduler that never drains). With `speculation`, each decode
// verifies gamma + 1 positions and emits what its acceptance keeps. With `routing`, the target's
// passes route by it (ServingCore::RouteBy).
ReplayResult ReplayByIteration(ForwardModel& model, const scheduler::SchedulerConfig& config,
                               const std::vector<ReplayArrival>& arrivals,
                               int64_t max_iterations = 1000000,
                               ServingSpeculation speculation = {},
                               routing::RoutingSource* routing = nullptr);

}  // namespace moelab::executor
