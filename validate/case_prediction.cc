#include "validate/case_prediction.h"

#include "base/error.h"
#include "model/sd_plan.h"

namespace moelab::validate {

Prediction Predict(const CostSource& source, const ExpertActivation* routing, const ValidationCase& spec,
                   const PredictedModels& models, double effective_sigma) {
  const MoeModelSpec& target = spec.held_out_shape ? models.held_out : models.target;
  Prediction prediction;
  switch (spec.kind) {
    case CaseKind::kDecode:
      prediction.value = source.Forward(target, {spec.batch, 1, spec.MeanDecodeContext(), true, routing}).time_s;
      return prediction;
    case CaseKind::kPrefill:
      prediction.value = source.Forward(target, {spec.batch, spec.prompt, spec.context, false, routing}).time_s;
      return prediction;
    case CaseKind::kBeam:
      prediction.value = source.Forward(target, {spec.beam_width, 1, spec.MeanDecodeContext(), true, routing}).time_s;
      return prediction;
    case CaseKind::kSd: {
      if (!(effective_sigma > 0 && effective_sigma <= 1)) {
        throw Error("an SD prediction needs the run's accepted-length fraction in (0, 1]");
      }
      SdStepCosts costs(source, target, models.draft, spec.MeanDecodeContext());
      costs.RouteTargetBy(routing);
      const double plain = costs.TargetStep(spec.batch, 1);
      const double verify = costs.TargetStep(spec.batch, spec.gamma + 1);
      const double round = static_cast<double>(spec.gamma) * costs.DraftStep(spec.batch) + verify +
                           costs.Reject(spec.batch, spec.gamma);
      prediction.value = effective_sigma * static_cast<double>(spec.gamma + 1) * plain / round;
      prediction.target_efficiency = plain / verify;
      return prediction;
    }
  }
  throw Error("unknown case kind");
}

}  // namespace moelab::validate
