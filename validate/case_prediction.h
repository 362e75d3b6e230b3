#pragma once

#include <cstdint>
#include <vector>

#include "model/cost_source.h"
#include "model/expert_activation.h"
#include "model/model_spec.h"
#include "validate/operator_breakdown.h"
#include "validate/validation_case.h"

namespace moelab::validate {

// The models a validation predicts: the executor's target, its held-out shape, the draft.
struct PredictedModels {
  model::MoeModelSpec target;
  model::MoeModelSpec held_out;  // unused when the plan has no held-out case
  model::MoeModelSpec draft;
};

struct Prediction {
  double value = 0;  // the case's quantity (QuantityOf)
  // decode, prefill and beam: the pass's operators in the executor's categories; sd: those of one
  // full-batch verify pass, T_T(B, gamma + 1).
  OperatorSeconds operators;
  double target_efficiency = 0;  // sd: T_T(B, 1) / T_T(B, gamma + 1)
  // sd: the full-batch step times the prediction is made of (compared with the executor's in the
  // report, so a miss names its term).
  double plain_step_s = 0;   // T_T(B, 1)
  double draft_step_s = 0;   // a draft pass: the full-batch rounds' draft time / gamma
  double verify_step_s = 0;  // T_T(B, gamma + 1)
};

// What an SD run realized that is not a cost: acceptance is the run's random outcome, so the
// prediction replays its rounds and is judged on time alone.
struct SdRealization {
  std::vector<int64_t> sequences_per_round;  // sequences still generating in each round
  // Per round, the sequences whose first draft pass fed two tokens (empty: none did).
  std::vector<int64_t> catch_up_per_round;
  int64_t plain_decode_steps = 0;  // steps of the plain decode the speedup divides
};

// What `source` predicts for `spec` with the target's tokens routed by `routing` (nullptr:
// uniform):
//   decode  T(B, 1) at the mean decode context;      prefill  T(B, prompt) on an empty cache;
//   beam    T(width, 1) at the mean decode context (scoring the width x vocabulary candidates
//           and copying the kept beams' caches are left out: 0.3-0.4 ms a beam and step with a
//           32000-token vocabulary, 4 % of a width-6 step; 0.7-0.8 ms before the executor
//           kept each beam's best in a short list and reused its caches);
//   sd      steps T_T(B, 1) / sum over the run's rounds r of
//           (gamma T_D(n_r, 1) + c_r / n_r (T_D(n_r, 2) - T_D(n_r, 1)) + T_T(n_r, gamma + 1) +
//           T_reject(n_r)), n_r the sequences round r carried, c_r those whose first draft pass
//           fed two tokens (the last draft and the bonus token after a round that accepted all
//           gamma): formulas.md section 1's sigma (gamma + 1) T_T / T_round, with the realized
//           rounds instead of the expected sigma, and the batch shrinking as sequences finish.
Prediction Predict(const model::CostSource& source, const model::ExpertActivation* routing,
                   const ValidationCase& spec, const PredictedModels& models,
                   const SdRealization& realized);

}  // namespace moelab::validate
