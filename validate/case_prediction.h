#pragma once

#include "model/cost_source.h"
#include "model/expert_activation.h"
#include "model/model_spec.h"
#include "validate/validation_case.h"

namespace moelab::validate {

// The models a validation predicts: the executor's target, its held-out shape, the draft.
struct PredictedModels {
  MoeModelSpec target;
  MoeModelSpec held_out;  // unused when the plan has no held-out case
  MoeModelSpec draft;
};

struct Prediction {
  double value = 0;              // the case's quantity (QuantityOf)
  double target_efficiency = 0;  // sd: T_T(B, 1) / T_T(B, gamma + 1)
};

// What `source` predicts for `spec` with the target's tokens routed by `routing` (nullptr:
// uniform):
//   decode  T(B, 1) at the mean decode context;      prefill  T(B, prompt) on an empty cache;
//   beam    T(width, 1) at the mean decode context (scoring the width x vocabulary candidates
//           and copying the kept beams' caches are left out: under 2 % at these shapes);
//   sd      sigma (gamma + 1) T_T(B, 1) / (gamma T_D(B, 1) + T_T(B, gamma + 1) + T_reject)
//           (formulas.md section 1) with the sigma the run realized (`effective_sigma`: the
//           acceptance is the run's random outcome, not a cost; the model is judged on time).
Prediction Predict(const CostSource& source, const ExpertActivation* routing, const ValidationCase& spec,
                   const PredictedModels& models, double effective_sigma);

}  // namespace moelab::validate
