#include "validate/case_prediction.h"

#include "base/error.h"
#include <string>

#include "model/sd_plan.h"

namespace moelab::validate {

Prediction Predict(const model::CostSource& source, const model::ExpertActivation* routing,
                   const ValidationCase& spec, const PredictedModels& models,
                   const SdRealization& realized) {
  const model::MoeModelSpec& target = spec.held_out_shape ? models.held_out : models.target;
  Prediction prediction;
  switch (spec.kind) {
    case CaseKind::kDecode:
      prediction.value =
          source.Forward(target, {spec.batch, 1, spec.MeanDecodeContext(), true, routing}).time_s;
      return prediction;
    case CaseKind::kPrefill:
      prediction.value =
          source.Forward(target, {spec.batch, spec.prompt, spec.context, false, routing}).time_s;
      return prediction;
    case CaseKind::kBeam:
      prediction.value =
          source.Forward(target, {spec.beam_width, 1, spec.MeanDecodeContext(), true, routing})
              .time_s;
      return prediction;
    case CaseKind::kSd: {
      if (realized.sequences_per_round.empty() || realized.plain_decode_steps <= 0) {
        throw base::Error(
            "an SD prediction needs the run's rounds and its plain decode's step count");
      }
      model::SdStepCosts costs(source, target, models.draft, spec.MeanDecodeContext());
      costs.RouteTargetBy(routing);
      double sd_s = 0;
      for (int64_t sequences : realized.sequences_per_round) {
        if (sequences <= 0 || sequences > spec.batch) {
          throw base::Error("an SD round carried " + std::to_string(sequences) +
                            " sequences; expected 1.." + std::to_string(spec.batch));
        }
        sd_s += static_cast<double>(spec.gamma) * costs.DraftStep(sequences) +
                costs.TargetStep(sequences, spec.gamma + 1) + costs.Reject(sequences, spec.gamma);
      }
      prediction.plain_step_s = costs.TargetStep(spec.batch, 1);
      prediction.draft_step_s = costs.DraftStep(spec.batch);
      prediction.verify_step_s = costs.TargetStep(spec.batch, spec.gamma + 1);
      prediction.value =
          static_cast<double>(realized.plain_decode_steps) * prediction.plain_step_s / sd_s;
      prediction.target_efficiency = prediction.plain_step_s / prediction.verify_step_s;
      return prediction;
    }
    case CaseKind::kOffload:
    case CaseKind::kOffloadPrefill:
      break;  // validate/offload_cases.h predicts them with the simulator
  }
  throw base::Error(ToString(spec.kind) + " cases are not predicted from a cost source alone");
}

}  // namespace moelab::validate
