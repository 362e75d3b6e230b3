#include "validate/impl/case_judge.h"

#include <algorithm>
#include <optional>

namespace moelab::validate::impl {

MeasuredCase MeasureCase(const std::vector<ValidationCase>& cases,
                         const std::vector<std::vector<CaseRun>>& runs, size_t index) {
  const ValidationCase& spec = cases[index];
  const std::vector<CaseRun>& own = runs[index];
  std::vector<double> values;
  for (const CaseRun& run : own) values.push_back(run.value);
  // From three repeats on, each step's median over them, summed (the runs' totals where their
  // steps differ; fewer repeats have no median that leaves a run's burst out).
  std::vector<std::vector<double>> steps, baseline_steps;
  for (const CaseRun& run : own) steps.push_back(run.steps_s);
  // An SD speedup's reference: the same plain decode, run before every SD case at this batch
  // (every gamma), pooled: a burst or a calm spell during one case's baseline no longer moves
  // that case alone, and the gammas at a batch share one denominator, so the measured best gamma
  // is the one whose SD run was fastest. Each SD run is first brought to the pooled reference's
  // speed by its own plain decode (AtReferenceSpeed): pooled alone, a gamma-4 case at B=6 whose SD
  // steps fell in slow stretches in two of three rounds measured 1.308, below all three of its
  // runs against their own plain decodes (1.392-1.556; validate-quick-avx512bf16-2026-12-07-
  // round-factors), and the best gamma was judged on that.
  for (size_t j = 0; j < cases.size(); ++j) {
    if (!SameSdBaseline(spec, cases[j])) continue;
    for (const CaseRun& run : runs[j]) baseline_steps.push_back(run.baseline_steps_s);
  }
  const std::optional<double> baseline_sum = SumOfStepMedians(baseline_steps);
  // An SD run's steps at the speed its own plain decode, right before, found the machine in.
  std::optional<std::vector<std::vector<double>>> at_reference_speed;
  if (spec.kind == CaseKind::kSd) {
    std::vector<std::vector<double>> own_baselines;
    for (const CaseRun& run : own) own_baselines.push_back(run.baseline_steps_s);
    if (const std::optional<std::vector<double>> pooled = StepMedians(baseline_steps))
      at_reference_speed = AtReferenceSpeed(steps, own_baselines, *pooled);
  }
  const std::optional<double> steps_sum =
      SumOfStepMedians(at_reference_speed ? *at_reference_speed : steps);
  MeasuredCase m;
  m.value = Median(values);
  const bool by_steps = values.size() >= 3;
  if (by_steps && spec.kind == CaseKind::kSd && steps_sum && baseline_sum) {
    m.value = *baseline_sum / *steps_sum;
  } else if (by_steps && spec.kind != CaseKind::kSd && steps_sum && own.front().value > 0) {
    // The quantity per step as each run defines it (its steps' total over its value).
    double front_total = 0;
    for (double s : own.front().steps_s) front_total += s;
    m.value = *steps_sum / (front_total / own.front().value);
  }
  m.min = *std::min_element(values.begin(), values.end());
  m.max = *std::max_element(values.begin(), values.end());
  m.repeats = static_cast<int>(values.size());
  std::vector<double> efficiencies, plain_steps, draft_steps, verify_steps;
  for (const CaseRun& run : own) {
    if (!run.operators.empty()) m.operators.push_back(run.operators);
    efficiencies.push_back(run.target_efficiency);
    plain_steps.push_back(run.plain_step_s);
    draft_steps.push_back(run.draft_step_s);
    verify_steps.push_back(run.verify_step_s);
  }
  if (spec.kind == CaseKind::kSd) {
    m.sigma = own.front().sigma;
    m.target_efficiency = Median(efficiencies);
    m.plain_step_s = Median(plain_steps);
    m.draft_step_s = Median(draft_steps);
    m.verify_step_s = Median(verify_steps);
  }
  // Acceptance is seeded: every repeat realizes the same rounds.
  m.realized = {own.front().sequences_per_round, own.front().catch_up_per_round,
                own.front().plain_decode_steps};
  return m;
}

std::vector<CaseResult> JudgeCase(
    const ValidationCase& spec, const MeasuredCase& measured,
    const std::vector<std::shared_ptr<const model::CostSource>>& sources,
    const AssumedRoutings& routings, const PredictedModels& models) {
  std::vector<CaseResult> results;
  for (const auto& source : sources) {
    for (const auto& [assumed, routing_assumed] : routings) {
      const Prediction prediction = Predict(*source, assumed, spec, models, measured.realized);
      CaseResult r;
      r.spec = spec;
      r.cost_source = source->name();
      r.routing = model::DescribeActivation(assumed);
      r.routing_assumed = routing_assumed;
      r.predicted = prediction.value;
      r.measured = measured.value;
      r.measured_min = measured.min;
      r.measured_max = measured.max;
      r.repeats = measured.repeats;
      r.abs_error = AbsError(r.predicted, r.measured);
      if (!measured.operators.empty() && !prediction.operators.empty()) {
        r.predicted_operators_s = prediction.operators;
        r.measured_operators_s = MedianOperatorSeconds(measured.operators);
      }
      if (spec.kind == CaseKind::kSd) {
        r.sigma = measured.sigma;
        r.predicted_target_efficiency = prediction.target_efficiency;
        r.measured_target_efficiency = measured.target_efficiency;
        r.predicted_plain_step_s = prediction.plain_step_s;
        r.predicted_draft_step_s = prediction.draft_step_s;
        r.predicted_verify_step_s = prediction.verify_step_s;
        r.measured_plain_step_s = measured.plain_step_s;
        r.measured_draft_step_s = measured.draft_step_s;
        r.measured_verify_step_s = measured.verify_step_s;
      }
      results.push_back(r);
    }
  }
  return results;
}

}  // namespace moelab::validate::impl
