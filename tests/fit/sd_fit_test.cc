#include "fit/sd_fit.h"

#include <cmath>

#include <gtest/gtest.h>

#include "fit/predict.h"
#include "base/error.h"
#include "model/parameter_count.h"
#include "tests/fit/synthetic.h"

namespace moelab::fit {
namespace {

using testing::PlantedSdParams;
using testing::PowersOfTwo;
using testing::QwenScales;
using testing::SdGrid;

constexpr int kDraftBias = 4;
constexpr int kRejectBias = 6;

// The grid of the issue: K in {1, 2, 4, 8}, E = 64, gamma in {2, 4}, batch 1..256 in powers of
// two (72 points), 1 % multiplicative noise, planted parameters from tests/fit/synthetic.h.
struct Planted {
  model::MoesdParams truth;
  SdFitScales scales;
  std::vector<SdMeasurement> points;
};

Planted MakePlanted(model::SdDenominator denominator, uint64_t seed = 7) {
  Planted p;
  std::vector<SdMeasurement> probe(1);
  probe[0].point = {256, 4, 8, 64, 0.5};  // B_max and gamma_max fix T_rej before the data exist
  p.truth = PlantedSdParams(QwenScales(probe));
  p.points = SdGrid(p.truth, QwenScales(probe).ridge_point_tokens, denominator, {1, 2, 4, 8},
                    {2, 4}, PowersOfTwo(256), 0.01, seed);
  p.scales = QwenScales(p.points);
  return p;
}

// What the data determine, and how each is checked:
//  - Not identifiable, only required within bounds: bias (the common scale of the eight time
//    parameters: the speedup is a ratio of times) and, under Algorithm 1, reject_bias (only
//    draft_bias + reject_bias enters). fit/sd_fit.h.
//  - Every other parameter within 3 standard errors of the planted value, time parameters as
//    ratios to bias (their std errors are conditional on bias), draft_bias as
//    (draft_bias + reject_bias) / bias under Algorithm 1.
//  - k1, k3 and draft_k are weakly determined: they trade against s and lambda (k G ~ k s^P), and
//    over 60 noise seeds about 1 fit in 6 lands in a valley with all three near 0 where their
//    linearised std errors are far too small (fit/README.md, "Calibration"). Beyond the 3-SE check
//    of this seed, the ratio k3 / k1, which stayed within [4.4, 10.4] for a planted 6.67 over those
//    60 seeds, is required within a factor of 2.
//  - Predictions, which is what the fit is for: within 3 % of the noiseless planted model at every
//    grid point and off the grid (worst measured over 60 seeds: 2.0 % and 1.4 %, for 1 % noise).
void ExpectRecovered(const SdFit& fit, const Planted& planted) {
  const model::MoesdParams& truth = planted.truth;
  ASSERT_EQ(fit.covariance_status, "ok") << fit.covariance_note;
  const bool summed = fit.denominator == model::SdDenominator::kAlgorithm1;
  for (int i : {0, kRejectBias}) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_GE(fit.params.values[k], fit.bounds.lower[k]) << model::MoesdParams::kNames[k];
    EXPECT_LE(fit.params.values[k], fit.bounds.upper[k]) << model::MoesdParams::kNames[k];
  }
  EXPECT_FALSE(fit.std_errors[0].has_value());
  EXPECT_EQ(fit.std_errors[kRejectBias].has_value(), !summed);
  EXPECT_EQ(fit.gauge_fixed.size(), summed ? 2u : 1u);
  const double bias = fit.params.values[0];
  const double true_bias = truth.values[0];
  for (int i = 1; i < model::MoesdParams::kCount; ++i) {
    const size_t k = static_cast<size_t>(i);
    if (summed && i == kRejectBias) continue;
    ASSERT_TRUE(fit.std_errors[k].has_value()) << model::MoesdParams::kNames[k];
    const bool time = i < 8;
    double fitted = fit.params.values[k];
    double expected = truth.values[k];
    if (summed && i == kDraftBias) {
      fitted += fit.params.values[kRejectBias];
      expected += truth.values[kRejectBias];
    }
    if (time) {
      fitted /= bias;
      expected /= true_bias;
    }
    const double error = time ? *fit.std_errors[k] / bias : *fit.std_errors[k];
    EXPECT_LE(std::fabs(fitted - expected), 3.0 * error)
        << model::MoesdParams::kNames[k] << ": fitted " << fitted << ", planted " << expected
        << ", se " << error;
  }
  const double ratio = fit.params.values[3] / fit.params.values[1];
  const double true_ratio = truth.values[3] / truth.values[1];
  EXPECT_LT(std::fabs(std::log(ratio / true_ratio)), std::log(2.0)) << "k3/k1 " << ratio;

  std::vector<model::SdPoint> check;
  for (const SdMeasurement& m : planted.points) check.push_back(m.point);
  for (int64_t batch : {3, 12, 48, 100, 200})
    check.push_back({batch, 3, 6, 64, testing::SigmaFor(3)});
  for (const model::SdPoint& point : check) {
    const double noiseless =
        model::MoesdSpeedup(truth, point, planted.scales.ridge_point_tokens, fit.denominator);
    EXPECT_NEAR(PredictSpeedup(fit, point) / noiseless, 1.0, 0.03)
        << "batch " << point.batch << " gamma " << point.gamma << " K " << point.top_k;
  }
  // Metrics: 1 % noise on speedups ~ 1..2 gives RMSE ~ 0.01-0.02 and MAPE ~ 0.8 %.
  EXPECT_LT(fit.mape, 1.5);
  EXPECT_GT(*fit.r2, 0.99);
  ASSERT_TRUE(fit.loo_rmse.has_value());
  EXPECT_GE(*fit.loo_rmse, fit.rmse * 0.9);
  EXPECT_LT(*fit.loo_rmse, 2 * fit.rmse);
  EXPECT_EQ(fit.n, 72);
}

TEST(SdFit, RecoversPlantedParametersAlgorithm1) {
  const Planted planted = MakePlanted(model::SdDenominator::kAlgorithm1);
  const SdFit fit = FitSd(planted.points, planted.scales, model::SdDenominator::kAlgorithm1,
                          FitOptions{}, "grid");
  EXPECT_EQ(fit.denominator, model::SdDenominator::kAlgorithm1);
  ExpectRecovered(fit, planted);
}

TEST(SdFit, RecoversPlantedParametersEquation4) {
  const Planted planted = MakePlanted(model::SdDenominator::kEquation4);
  const SdFit fit =
      FitSd(planted.points, planted.scales, model::SdDenominator::kEquation4, FitOptions{}, "grid");
  ExpectRecovered(fit, planted);
}

TEST(SdFit, SameSeedSameFitAndEveryStartInsideTheBounds) {
  const Planted planted = MakePlanted(model::SdDenominator::kEquation4);
  const SdFit a =
      FitSd(planted.points, planted.scales, model::SdDenominator::kEquation4, FitOptions{}, "grid");
  const SdFit b =
      FitSd(planted.points, planted.scales, model::SdDenominator::kEquation4, FitOptions{}, "grid");
  EXPECT_EQ(a.params.values, b.params.values);
  EXPECT_EQ(a.final_cost, b.final_cost);
  for (int i = 0; i < model::MoesdParams::kCount; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_GE(a.initial_params.values[k], a.bounds.lower[k]);
    EXPECT_LE(a.initial_params.values[k], a.bounds.upper[k]);
  }
}

// The bounds come from the specs through model/ (fit/sd_bounds.h).
TEST(SdBounds, FollowFromTheSpecs) {
  const model::PresetStore store(testing::PresetDir());
  const model::MoeModelSpec target = store.LoadModel("qwen2-57b-a14b");
  const model::MoeModelSpec draft = store.LoadModel("qwen2-0.5b");
  const model::HardwareSpec hardware = store.LoadHardware("2xa100-80gb-sxm");
  std::vector<SdMeasurement> points(1);
  points[0].point = {64, 3, 8, 64, 0.5};
  const SdFitScales s = ComputeSdFitScales(target, draft, hardware, points, std::nullopt);
  const double bandwidth = 2 * hardware.accelerator->memory_bandwidth_bytes_per_s;
  const model::WeightBytes w = model::CountWeightBytes(target);
  const double moe_layers = static_cast<double>(target.num_moe_layers());
  EXPECT_DOUBLE_EQ(s.bandwidth_bytes_per_s, bandwidth);
  EXPECT_DOUBLE_EQ(s.t_dense_s, (w.total - moe_layers * 64 * w.expert) / bandwidth);
  EXPECT_DOUBLE_EQ(s.t_expert_s, moe_layers * w.expert / bandwidth);
  EXPECT_DOUBLE_EQ(s.t_draft_s, model::CountWeightBytes(draft).total / bandwidth);
  EXPECT_DOUBLE_EQ(s.t_reject_max_s,
                   12.0 * static_cast<double>(target.vocab_size) * 64 * 4 / bandwidth);
  EXPECT_NEAR(s.ridge_point_tokens, 312e12 / 2.039e12, 2.0);  // A100 bf16 peak / HBM bandwidth
  // Qwen2-57B-A14B: ~15 GB of non-expert weights over 2 x 2 TB/s: a few milliseconds.
  EXPECT_GT(s.t_dense_s, 2e-3);
  EXPECT_LT(s.t_dense_s, 6e-3);

  const SdBounds b = ComputeSdBounds(s);
  EXPECT_EQ(b.lower[0], s.t_dense_s);
  EXPECT_EQ(b.upper[0], 5 * s.t_dense_s);
  EXPECT_EQ(b.lower[2], s.t_expert_s);
  EXPECT_EQ(b.upper[4], 5 * s.t_draft_s);
  EXPECT_TRUE(std::isinf(b.upper[1]) && std::isinf(b.upper[3]) && std::isinf(b.upper[5]));
  EXPECT_EQ(b.upper[6], s.t_reject_max_s);
  EXPECT_EQ(b.lower[8], 0.2);
  EXPECT_EQ(b.upper[9], 2.0);

  const SdFitScales overridden = ComputeSdFitScales(target, draft, hardware, points, 0.01);
  EXPECT_EQ(overridden.t_reject_max_s, 0.01);
  EXPECT_EQ(overridden.t_reject_source, "--max-reject-s");
  EXPECT_THROW(ComputeSdFitScales(target, draft, hardware, points, -1.0), base::Error);
  // A dense target has no routed expert to bound k2 with.
  EXPECT_THROW(
      ComputeSdFitScales(store.LoadModel("opt-30b"), draft, hardware, points, std::nullopt),
      base::Error);
}

std::string FitError(const std::vector<SdMeasurement>& points,
                     const FitOptions& options = FitOptions{}) {
  try {
    FitSd(points, QwenScales(points), model::SdDenominator::kAlgorithm1, options, "runs.csv");
  } catch (const base::Error& e) {
    return e.what();
  }
  return "";
}

TEST(SdFit, RefusesFewerPointsThanParameters) {
  Planted planted = MakePlanted(model::SdDenominator::kAlgorithm1);
  planted.points.resize(9);
  planted.points[8].point.batch = 4;
  const std::string message = FitError(planted.points);
  EXPECT_NE(message.find("runs.csv"), std::string::npos) << message;
  EXPECT_NE(message.find("9 measurement"), std::string::npos) << message;
  EXPECT_NE(message.find("at least 10"), std::string::npos) << message;
}

TEST(SdFit, RefusesAllPointsAtOneBatchSize) {
  Planted planted = MakePlanted(model::SdDenominator::kAlgorithm1);
  std::vector<SdMeasurement> one_batch;
  for (const SdMeasurement& m : planted.points) {
    if (m.point.batch == 16) one_batch.push_back(m);
  }
  ASSERT_GE(one_batch.size(), 8u);
  while (one_batch.size() < 12) one_batch.push_back(one_batch.front());
  const std::string message = FitError(one_batch);
  EXPECT_NE(message.find("every measurement is at batch 16"), std::string::npos) << message;
}

TEST(SdFit, RefusesASolveThatDoesNotConverge) {
  const Planted planted = MakePlanted(model::SdDenominator::kAlgorithm1);
  FitOptions options;
  options.max_iterations = 1;
  const std::string message = FitError(planted.points, options);
  EXPECT_NE(message.find("did not converge"), std::string::npos) << message;
  EXPECT_NE(message.find("Ceres: NO_CONVERGENCE"), std::string::npos) << message;
}

TEST(SdFit, RefusesBadOptions) {
  const Planted planted = MakePlanted(model::SdDenominator::kAlgorithm1);
  FitOptions options;
  options.loss = "l2";
  EXPECT_NE(FitError(planted.points, options).find("loss"), std::string::npos);
}

TEST(SdPredict, MatchesTheModelAndRefusesBadPoints) {
  const Planted planted = MakePlanted(model::SdDenominator::kEquation4);
  SdFit fit;
  fit.params = planted.truth;
  fit.denominator = model::SdDenominator::kEquation4;
  fit.scales = planted.scales;
  const model::SdPoint point{32, 4, 8, 64, 0.7};
  EXPECT_DOUBLE_EQ(PredictSpeedup(fit, point),
                   model::MoesdSpeedup(planted.truth, point, planted.scales.ridge_point_tokens,
                                       model::SdDenominator::kEquation4));
  EXPECT_THROW(PredictSpeedup(fit, {32, 4, 80, 64, 0.7}), base::Error);  // K > E
  EXPECT_THROW(PredictSpeedup(fit, {32, 4, 8, 64, 1.5}), base::Error);   // sigma > 1
  EXPECT_THROW(PredictSpeedup(fit, {0, 4, 8, 64, 0.5}), base::Error);    // batch 0
  // The measured points' bounds: E up to 4,096, batch and gamma up to 1e15.
  EXPECT_THROW(PredictSpeedup(fit, {32, 4, 8, 5000, 0.5}), base::Error);
  EXPECT_THROW(PredictSpeedup(fit, {int64_t{1} << 62, 4, 8, 64, 0.5}), base::Error);
  EXPECT_THROW(PredictSpeedup(fit, {32, int64_t{1} << 62, 8, 64, 0.5}), base::Error);
}

}  // namespace
}  // namespace moelab::fit
