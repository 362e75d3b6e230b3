#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "model/cost_source.h"
#include "model/expert_activation.h"
#include "validate/case_prediction.h"
#include "validate/executor_bench.h"
#include "validate/operator_breakdown.h"
#include "validate/validation_case.h"
#include "validate/validation_metrics.h"

namespace moelab::validate::impl {

// The in-memory cases (decode, prefill, sd, beam) judged: a case's runs reduced to what was
// measured, and every cost source's prediction with every routing against it.

// A case's runs over every round, reduced.
struct MeasuredCase {
  // The case's quantity: the median of the runs' values, or from three repeats on each step's
  // median over them, summed (an SD speedup: the pooled plain decode's over the SD run's).
  double value = 0;
  double min = 0, max = 0;  // of the runs' values
  int repeats = 0;
  std::vector<OperatorSeconds> operators;  // each run's operator times, where it measured them
  // sd only: the medians over the runs, and the rounds the (seeded) runs realized.
  double sigma = 0;
  double target_efficiency = 0;
  double plain_step_s = 0, draft_step_s = 0, verify_step_s = 0;
  SdRealization realized;
};

// Case `index` of `cases` from `runs[index]` (every case's runs: an SD case pools the plain decode
// of every case with its SD baseline).
MeasuredCase MeasureCase(const std::vector<ValidationCase>& cases,
                         const std::vector<std::vector<CaseRun>>& runs, size_t index);

// The routings a prediction assumes, with their CaseResult::routing_assumed: the decode run's
// recorded routing (the headline), the SD and decode runs' recorded routing, and uniform
// (nullptr).
using AssumedRoutings = std::vector<std::pair<const model::ExpertActivation*, const char*>>;

// One CaseResult per source and routing, in that order.
std::vector<CaseResult> JudgeCase(
    const ValidationCase& spec, const MeasuredCase& measured,
    const std::vector<std::shared_ptr<const model::CostSource>>& sources,
    const AssumedRoutings& routings, const PredictedModels& models);

}  // namespace moelab::validate::impl
