#include "fit/least_squares.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/fit/synthetic.h"

// Solves stop at Ceres' default function tolerance (relative cost change 1e-6), i.e. within about
// 1e-3 sqrt(n - p) standard errors of the exact optimum: exact answers are checked to 1e-3.

namespace moelab::fit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// y = exp(m x + c), Ceres' curve_fitting example.
struct ExpRow {
  double x;
  template <typename T>
  T operator()(const T* p) const {
    using std::exp;
    return exp(p[0] * x + p[1]);
  }
};

struct LineRow {
  double x;
  template <typename T>
  T operator()(const T* p) const {
    return p[0] + p[1] * x;
  }
};

// Only a + b is identifiable.
struct SumRow {
  double x;
  template <typename T>
  T operator()(const T* p) const {
    return (p[0] + p[1]) * x;
  }
};

// y = a / (a + b x): invariant under (a, b) -> (c a, c b), like the MoESD speedup.
struct RatioRow {
  double x;
  template <typename T>
  T operator()(const T* p) const {
    return p[0] / (p[0] + p[1] * x);
  }
};

struct ConstantRow {
  template <typename T>
  T operator()(const T* p) const {
    return p[0];
  }
};

template <int kParams, typename Row>
LeastSquaresModel MakeModel(std::vector<ParameterSpec> parameters, std::vector<Row> rows,
                            std::vector<double> measured, std::vector<double> centre) {
  LeastSquaresModel model;
  model.description = "test fit";
  model.parameters = std::move(parameters);
  model.measured = measured;
  model.make_cost = [rows, measured](int row, const std::vector<double>& scale) {
    return MakeScaledRowCost<kParams>(rows[static_cast<size_t>(row)],
                                      measured[static_cast<size_t>(row)], 1.0, scale);
  };
  model.predict = [rows](const std::vector<double>& p, int row) {
    return rows[static_cast<size_t>(row)](p.data());
  };
  model.make_start = [centre](int index, StartSampler& sampler) {
    std::vector<double> start = centre;
    if (index > 0) {
      for (double& v : start) v *= sampler.Uniform(0.5, 1.5);
    }
    return start;
  };
  return model;
}

LeastSquaresModel ExpModel(uint64_t seed, double noise_sd) {
  testing::Noise noise(seed);
  std::vector<ExpRow> rows;
  std::vector<double> y;
  for (int i = 0; i <= 50; ++i) {
    const double x = 0.1 * i;
    rows.push_back({x});
    y.push_back(std::exp(0.3 * x + 0.1) + noise_sd * noise.Normal());
  }
  return MakeModel<2>({{"m", -kInf, kInf}, {"c", -kInf, kInf}}, rows, y, {0.05, 0.5});
}

TEST(LeastSquares, RecoversPlantedExponentialWithinThreeStandardErrors) {
  const LeastSquaresModel model = ExpModel(3, 0.02);
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_TRUE(fit.converged);
  EXPECT_EQ(fit.starts_converged, 8);
  ASSERT_EQ(fit.covariance, CovarianceStatus::kOk) << fit.covariance_note;
  const double planted[2] = {0.3, 0.1};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(fit.std_errors[static_cast<size_t>(i)].has_value());
    EXPECT_GT(*fit.std_errors[static_cast<size_t>(i)], 0);
    EXPECT_LE(std::fabs(fit.params[static_cast<size_t>(i)] - planted[i]),
              3 * *fit.std_errors[static_cast<size_t>(i)]);
  }
  // The residual variance estimate 2 cost / (n - p) recovers the planted noise (sd 0.02).
  EXPECT_NEAR(std::sqrt(2 * fit.final_cost / (51 - 2)), 0.02, 0.005);
}

TEST(LeastSquares, SameSeedSameFit) {
  const LeastSquaresModel model = ExpModel(3, 0.02);
  FitOptions options;
  options.seed = 42;
  const LeastSquaresFit a = SolveLeastSquares(model, options);
  const LeastSquaresFit b = SolveLeastSquares(model, options);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.final_cost, b.final_cost);
  StartSampler s1(9), s2(9);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(s1.Uniform(0, 1), s2.Uniform(0, 1));
}

TEST(LeastSquares, RankDeficientGivesNullStdErrorsWithAFlag) {
  std::vector<SumRow> rows;
  std::vector<double> y;
  for (int i = 1; i <= 10; ++i) {
    rows.push_back({static_cast<double>(i)});
    y.push_back(3.0 * i + 0.01 * (i % 3));
  }
  const LeastSquaresModel model = MakeModel<2>({{"a", 0, 10}, {"b", 0, 10}}, rows, y, {1, 1});
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_NEAR(fit.params[0] + fit.params[1], 3.0, 5e-3);
  EXPECT_EQ(fit.covariance, CovarianceStatus::kRankDeficient);
  EXPECT_NE(fit.covariance_note.find("rank deficient"), std::string::npos);
  for (const auto& error : fit.std_errors) EXPECT_FALSE(error.has_value());
}

TEST(LeastSquares, NoDegreesOfFreedomGivesNullStdErrors) {
  const LeastSquaresModel model = MakeModel<2>({{"a", -kInf, kInf}, {"b", -kInf, kInf}},
                                               std::vector<LineRow>{{1}, {2}}, {3, 5}, {1, 1});
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_NEAR(fit.params[0], 1, 1e-6);
  EXPECT_NEAR(fit.params[1], 2, 1e-6);
  EXPECT_EQ(fit.covariance, CovarianceStatus::kNoDegreesOfFreedom);
  EXPECT_FALSE(fit.std_errors[0].has_value());
}

TEST(LeastSquares, GaugeFixedParameterHasNoStdErrorAndTheOthersAreConditional) {
  testing::Noise noise(5);
  std::vector<RatioRow> rows;
  std::vector<double> y;
  for (int i = 0; i < 20; ++i) {
    const double x = 0.5 * i;
    rows.push_back({x});
    y.push_back(2.0 / (2.0 + 0.8 * x) + 0.002 * noise.Normal());
  }
  LeastSquaresModel model = MakeModel<2>({{"a", 1, 5}, {"b", 0, kInf}}, rows, y, {3, 1});
  const LeastSquaresFit free_fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_EQ(free_fit.covariance, CovarianceStatus::kRankDeficient);  // the scale is free
  model.gauge_fixed = {0};
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  ASSERT_EQ(fit.covariance, CovarianceStatus::kOk) << fit.covariance_note;
  EXPECT_FALSE(fit.std_errors[0].has_value());
  ASSERT_TRUE(fit.std_errors[1].has_value());
  // b / a = 0.4 is what the data determine.
  EXPECT_LE(std::fabs(fit.params[1] / fit.params[0] - 0.4), 3 * *fit.std_errors[1] / fit.params[0]);
}

TEST(LeastSquares, NonConvergenceIsRefusedWithCeresMessage) {
  const LeastSquaresModel model = ExpModel(3, 0.02);
  FitOptions options;
  options.max_iterations = 1;
  try {
    SolveLeastSquares(model, options);
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("test fit"), std::string::npos) << message;
    EXPECT_NE(message.find("did not converge"), std::string::npos) << message;
    EXPECT_NE(message.find("NO_CONVERGENCE"), std::string::npos) << message;
  }
}

TEST(LeastSquares, BoundsHoldAndAreReported) {
  // Falling data, slope bounded at >= 0: the slope sits on its bound.
  std::vector<LineRow> rows;
  std::vector<double> y;
  for (int i = 0; i < 10; ++i) {
    rows.push_back({static_cast<double>(i)});
    y.push_back(5.0 - 0.3 * i);
  }
  const LeastSquaresModel model = MakeModel<2>({{"a", 0, kInf}, {"b", 0, kInf}}, rows, y, {1, 1});
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_EQ(fit.params[1], 0.0);
  EXPECT_TRUE(fit.at_bound[1]);
  EXPECT_FALSE(fit.at_bound[0]);
  EXPECT_NEAR(fit.params[0], 5.0 - 0.3 * 4.5, 1e-3);  // the mean
}

TEST(LeastSquares, RobustLossDownWeightsAnOutlier) {
  std::vector<LineRow> rows;
  std::vector<double> y;
  testing::Noise noise(11);
  for (int i = 0; i < 20; ++i) {
    rows.push_back({static_cast<double>(i)});
    y.push_back(1.0 + 0.5 * i + 0.01 * noise.Normal());
  }
  y[10] += 5;  // one wild point
  const LeastSquaresModel model =
      MakeModel<2>({{"a", -kInf, kInf}, {"b", -kInf, kInf}}, rows, y, {1, 1});
  const LeastSquaresFit plain = SolveLeastSquares(model, FitOptions{});
  for (const char* loss : {"huber", "cauchy"}) {
    FitOptions options;
    options.loss = loss;
    options.loss_scale = 0.05;
    const LeastSquaresFit robust = SolveLeastSquares(model, options);
    EXPECT_LT(std::fabs(robust.params[0] - 1.0), std::fabs(plain.params[0] - 1.0) / 5) << loss;
    EXPECT_NEAR(robust.params[1], 0.5, 0.01) << loss;
  }
}

// Leave-one-out by hand for a constant fitted to {1, 2, 3, 6}: the held-out point is predicted by
// the mean of the other three: errors 8/3, 4/3, 0, -4, so LOO RMSE = sqrt((64/9 + 16/9 + 16) / 4).
TEST(LeastSquares, LeaveOneOutMatchesHandComputation) {
  const LeastSquaresModel model =
      MakeModel<1>({{"c", -kInf, kInf}}, std::vector<ConstantRow>(4), {1, 2, 3, 6}, {1});
  const LeastSquaresFit fit = SolveLeastSquares(model, FitOptions{});
  EXPECT_NEAR(fit.params[0], 3.0, 1e-3);
  const std::optional<double> loo = CrossValidatedRmse(model, FitOptions{}, fit);
  ASSERT_TRUE(loo.has_value());
  EXPECT_NEAR(*loo, std::sqrt((64.0 / 9 + 16.0 / 9 + 16.0) / 4), 1e-3);
}

TEST(FitOptions, ValidateNamesTheField) {
  FitOptions options;
  EXPECT_NO_THROW(options.Validate());
  options.loss = "l1";
  EXPECT_THROW(options.Validate(), base::Error);
  options = FitOptions{};
  options.starts = 0;
  EXPECT_THROW(options.Validate(), base::Error);
  options = FitOptions{};
  options.loss_scale = 0;
  EXPECT_THROW(options.Validate(), base::Error);
  options = FitOptions{};
  options.max_iterations = 0;
  try {
    options.Validate();
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_iterations"), std::string::npos);
  }
}

}  // namespace
}  // namespace moelab::fit
