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
    case CaseKind::kPrefill:
    case CaseKind::kBeam: {
      model::ForwardShape shape =
          spec.kind == CaseKind::kPrefill
              ? model::ForwardShape{spec.batch, spec.prompt, spec.context, false, routing}
              : model::ForwardShape{spec.kind == CaseKind::kBeam ? spec.beam_width : spec.batch, 1,
                                    spec.MeanDecodeContext(), true, routing};
      // A beam step ranks every beam's next tokens over the vocabulary after its pass, inside
      // the step the executor times.
      if (spec.kind == CaseKind::kBeam) shape.ranked_rows = spec.beam_width;
      const model::ForwardCost cost = source.Forward(target, shape);
      prediction.value = cost.time_s;
      prediction.operators = OperatorSecondsOf(cost);
      return prediction;
    }
    case CaseKind::kSd: {
      if (realized.sequences_per_round.empty() || realized.plain_decode_steps <= 0) {
        throw base::Error(
            "an SD prediction needs the run's rounds and its plain decode's step count");
      }
      model::SdStepCosts costs(source, target, models.draft, spec.MeanDecodeContext());
      costs.RouteTargetBy(routing);
      const std::vector<int64_t>& catch_up = realized.catch_up_per_round;
      if (!catch_up.empty() && catch_up.size() != realized.sequences_per_round.size())
        throw base::Error("an SD realization needs the catch-up count of every round");
      // The draft's gamma passes of a round (the first after the target's verify, the others
      // each after one of the draft's), the first feeding `caught_up` of `n` sequences two
      // tokens: linear between the one- and two-token passes in the share of such sequences.
      const auto draft_round = [&](int64_t n, int64_t caught_up) {
        const double one = costs.DraftStep(n);
        const double share = static_cast<double>(caught_up) / static_cast<double>(n);
        return costs.DraftPasses(n, spec.gamma) +
               (caught_up > 0 ? share * (costs.DraftCatchUpStep(n) - one) : 0.0);
      };
      double sd_s = 0, full_batch_draft_s = 0;
      int64_t full_batch_rounds = 0;
      for (size_t r = 0; r < realized.sequences_per_round.size(); ++r) {
        const int64_t sequences = realized.sequences_per_round[r];
        const int64_t caught_up = catch_up.empty() ? 0 : catch_up[r];
        if (sequences <= 0 || sequences > spec.batch) {
          throw base::Error("an SD round carried " + std::to_string(sequences) +
                            " sequences; expected 1.." + std::to_string(spec.batch));
        }
        if (caught_up < 0 || caught_up > sequences) {
          throw base::Error("an SD round fed " + std::to_string(caught_up) +
                            " sequences two draft tokens; expected 0.." +
                            std::to_string(sequences));
        }
        const double draft_s = draft_round(sequences, caught_up);
        sd_s += draft_s + costs.TargetStep(sequences, spec.gamma + 1) +
                costs.Reject(sequences, spec.gamma);
        if (sequences == spec.batch) {
          full_batch_draft_s += draft_s;
          ++full_batch_rounds;
        }
      }
      prediction.plain_step_s = costs.TargetStep(spec.batch, 1);
      // One draft pass at the full batch, as measured: the full-batch rounds' draft time / gamma.
      prediction.draft_step_s =
          full_batch_rounds > 0
              ? full_batch_draft_s / static_cast<double>(full_batch_rounds) /
                    static_cast<double>(spec.gamma)
              : costs.DraftPasses(spec.batch, spec.gamma) / static_cast<double>(spec.gamma);
      prediction.verify_step_s = costs.TargetStep(spec.batch, spec.gamma + 1);
      prediction.operators = OperatorSecondsOf(source.Forward(
          target, {spec.batch, spec.gamma + 1, spec.MeanDecodeContext(), true, routing}));
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
