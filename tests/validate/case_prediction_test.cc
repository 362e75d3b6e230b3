#include "validate/case_prediction.h"

#include <gtest/gtest.h>

#include "model/cost_source.h"
#include "model/preset_store.h"
#include "model/sd_plan.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::validate {
namespace {

struct Fixture {
  model::PresetStore store{testing::PresetDir()};
  PredictedModels models{store.LoadModel("mixtral-8x7b"), store.LoadModel("mixtral-8x7b"),
                         store.LoadModel("qwen2-0.5b")};
  std::unique_ptr<model::RooflineCostSource> source = model::RooflineCostSource::ForHardware(
      store.LoadHardware("2xa100-80gb-sxm"), model::CostParameters{});
  ValidationCase sd;
  Fixture() {
    sd.kind = CaseKind::kSd;
    sd.batch = 2;
    sd.gamma = 3;
    sd.prompt = 16;
    sd.output_tokens = 17;
  }
  model::SdStepCosts Costs() const {
    return model::SdStepCosts(*source, models.target, models.draft, sd.MeanDecodeContext());
  }
};

// A beam step is its pass of `width` one-token sequences and the ranking of their next tokens
// (beam_selection), which a decode step of the same batch does not run.
TEST(CasePrediction, ABeamStepAddsItsRankingToTheDecodePass) {
  Fixture f;
  ValidationCase beam;
  beam.kind = CaseKind::kBeam;
  beam.beam_width = 3;
  beam.prompt = 16;
  beam.output_tokens = 9;
  ValidationCase decode = beam;
  decode.kind = CaseKind::kDecode;
  decode.batch = 3;
  const Prediction beam_step = Predict(*f.source, nullptr, beam, f.models, {});
  const Prediction decode_step = Predict(*f.source, nullptr, decode, f.models, {});
  model::ForwardShape shape{3, 1, beam.MeanDecodeContext(), true};
  shape.ranked_rows = 3;
  const double ranking =
      f.source->Forward(f.models.target, shape).OperatorTime(model::Operator::kBeamSelection);
  EXPECT_GT(ranking, 0.0);
  EXPECT_NEAR(beam_step.value, decode_step.value + ranking, 1e-12 * beam_step.value);
}

// A roofline whose draft pass right after another of the draft's takes half the first's time
// (what a fitted profile's draft_decode_warm curves give on a CPU, exaggerated).
class WarmDraftRoofline : public model::RooflineCostSource {
 public:
  using model::RooflineCostSource::RooflineCostSource;
  model::ForwardCost Forward(const model::MoeModelSpec& model,
                             const model::ForwardShape& shape) const override {
    model::ForwardCost cost = model::RooflineCostSource::Forward(model, shape);
    if (shape.after_own_pass) cost.time_s *= 0.5;
    return cost;
  }
};

// A round's gamma draft passes: the first after the target's verify, the others each right after
// one of the draft's; the catch-up's extra on the first.
TEST(CasePrediction, SdPricesARoundsLaterDraftPassesAsFollowingPasses) {
  Fixture f;
  const WarmDraftRoofline source(f.source->target(), f.source->params());
  model::SdStepCosts costs(source, f.models.target, f.models.draft, f.sd.MeanDecodeContext());
  const double first = costs.DraftStep(2), following = costs.DraftFollowingStep(2);
  EXPECT_NEAR(following, 0.5 * first, 1e-15);
  const double verify = costs.TargetStep(2, 4), reject = costs.Reject(2, 3);
  const double plain = costs.TargetStep(2, 1), catch_up = costs.DraftCatchUpStep(2);
  const SdRealization rounds{{2, 2}, {0, 2}, 10};
  const double round_s = first + 2 * following + verify + reject;
  const Prediction p = Predict(source, nullptr, f.sd, f.models, rounds);
  EXPECT_NEAR(p.value, 10 * plain / (2 * round_s + (catch_up - first)), 1e-9 * p.value);
  EXPECT_NEAR(p.draft_step_s, (2 * (first + 2 * following) + (catch_up - first)) / 2 / 3, 1e-12);
}

TEST(CasePrediction, SdReplaysTheRoundsAndTheDraftsCatchUpPasses) {
  Fixture f;
  model::SdStepCosts costs = f.Costs();
  const double draft = costs.DraftStep(2), draft_one = costs.DraftStep(1);
  const double catch_up = costs.DraftCatchUpStep(2);
  EXPECT_GT(catch_up, draft);  // two positions per sequence cost more than one
  const double verify = costs.TargetStep(2, 4), verify_one = costs.TargetStep(1, 4);
  const double reject = costs.Reject(2, 3), reject_one = costs.Reject(1, 3);
  const double plain = costs.TargetStep(2, 1);

  // Three rounds of 2 sequences then one of 1; no catch-up: gamma one-token draft passes each.
  const SdRealization plain_rounds{{2, 2, 2, 1}, {}, 10};
  const double rounds_s =
      3 * (3 * draft + verify + reject) + (3 * draft_one + verify_one + reject_one);
  const Prediction p = Predict(*f.source, nullptr, f.sd, f.models, plain_rounds);
  EXPECT_NEAR(p.value, 10 * plain / rounds_s, 1e-9 * p.value);
  EXPECT_NEAR(p.draft_step_s, draft, 1e-12);
  // The operators an SD case reports are one full-batch verify pass's, adding up to it.
  double verify_operators_s = 0;
  for (const auto& [category, seconds] : p.operators) verify_operators_s += seconds;
  EXPECT_NEAR(verify_operators_s, verify, 1e-9 * verify);
  EXPECT_GT(p.operators.at("experts"), 0);

  // The second round follows one that accepted every draft in both sequences, the third in one.
  const SdRealization caught_up{{2, 2, 2, 1}, {0, 2, 1, 0}, 10};
  const double extra = (catch_up - draft) * (2.0 / 2 + 1.0 / 2);
  const Prediction q = Predict(*f.source, nullptr, f.sd, f.models, caught_up);
  EXPECT_NEAR(q.value, 10 * plain / (rounds_s + extra), 1e-9 * q.value);
  EXPECT_NEAR(q.draft_step_s, draft + extra / 3 / 3, 1e-12);  // 3 full-batch rounds of gamma 3
  EXPECT_LT(q.value, p.value);

  EXPECT_NE(testing::ErrorOf([&] {
              Predict(*f.source, nullptr, f.sd, f.models, SdRealization{{2, 2}, {3, 0}, 10});
            }).find("fed 3 sequences two draft tokens; expected 0..2"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              Predict(*f.source, nullptr, f.sd, f.models, SdRealization{{2, 2}, {0}, 10});
            }).find("catch-up count of every round"),
            std::string::npos);
}

// A prefill's operators in the executor's categories: the roofline's projections and core are
// attention, its norms, residual adds and embedding are other, and the categories add up to the
// predicted time.
TEST(CasePrediction, PrefillOperatorsInTheExecutorsCategories) {
  Fixture f;
  ValidationCase prefill;
  prefill.kind = CaseKind::kPrefill;
  prefill.batch = 2;
  prefill.prompt = 96;
  const Prediction p = Predict(*f.source, nullptr, prefill, f.models, SdRealization{});
  const model::ForwardCost cost = f.source->Forward(f.models.target, {2, 96, 0, false});
  ASSERT_EQ(p.operators.size(), 5u);
  double sum = 0;
  for (const auto& [category, seconds] : p.operators) sum += seconds;
  EXPECT_NEAR(sum, p.value, 1e-12 * p.value);
  EXPECT_NEAR(p.operators.at("attention"),
              cost.OperatorTime(model::Operator::kAttentionProjections) +
                  cost.OperatorTime(model::Operator::kAttentionCore),
              1e-15);
  EXPECT_NEAR(p.operators.at("experts"), cost.OperatorTime(model::Operator::kRoutedExperts), 1e-15);
  EXPECT_NEAR(p.operators.at("other"),
              cost.OperatorTime(model::Operator::kNormsResidual) +
                  cost.OperatorTime(model::Operator::kEmbedding) +
                  cost.OperatorTime(model::Operator::kCommunication),
              1e-15);
  EXPECT_GT(p.operators.at("other"), 0);
  EXPECT_NEAR(p.operators.at("lm_head"), cost.OperatorTime(model::Operator::kLmHead), 1e-15);
}

}  // namespace
}  // namespace moelab::validate
