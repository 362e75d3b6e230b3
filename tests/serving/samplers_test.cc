#include "serving/samplers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace moelab::serving {
namespace {

struct Moments {
  double mean = 0, cv = 0;
};

template <typename Draw>
Moments MomentsOf(int count, Draw draw) {
  std::vector<double> values(static_cast<size_t>(count));
  double sum = 0;
  for (double& value : values) sum += value = draw();
  const double mean = sum / count;
  double squares = 0;
  for (double value : values) squares += (value - mean) * (value - mean);
  return {mean, std::sqrt(squares / (count - 1)) / mean};
}

// 40000 draws: the sample mean's standard error is CV / 200 of the mean, so 3 % is over 4
// standard errors for CV <= 1.4; the sample CV's error grows with the kurtosis (gamma shape 0.25:
// 27), about 2 % here, so 8 % is 4 of them.
constexpr int kDraws = 40000;

TEST(Samplers, UniformIsInTheUnitIntervalWithMeanAHalf) {
  base::SplitMix64Stream stream(7);
  const Moments m = MomentsOf(kDraws, [&] {
    const double u = UniformDraw(stream);
    EXPECT_TRUE(u >= 0 && u < 1);
    return u;
  });
  EXPECT_NEAR(m.mean, 0.5, 0.01);
  EXPECT_NEAR(m.cv, 1 / std::sqrt(3.0), 0.02);  // sd 1/sqrt(12) over mean 1/2
}

TEST(Samplers, ExponentialHasMeanOneOverRateAndCvOne) {
  base::SplitMix64Stream stream(11);
  const Moments m = MomentsOf(kDraws, [&] { return ExponentialDraw(stream, 4); });
  EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.03);
  EXPECT_NEAR(m.cv, 1, 0.05);
}

TEST(Samplers, NormalIsStandard) {
  base::SplitMix64Stream stream(13);
  double sum = 0, squares = 0;
  for (int i = 0; i < kDraws; ++i) {
    const double x = NormalDraw(stream);
    sum += x;
    squares += x * x;
  }
  EXPECT_NEAR(sum / kDraws, 0, 0.02);  // standard error 0.005
  EXPECT_NEAR(squares / kDraws, 1, 0.04);
}

TEST(Samplers, GammaHasMeanShapeAndCvOneOverRootShapeOnBothMethods) {
  for (const double shape : {0.25, 0.5, 1.0, 4.0, 25.0}) {
    base::SplitMix64Stream stream(17);
    const Moments m = MomentsOf(kDraws, [&] { return GammaDraw(stream, shape); });
    const double cv = 1 / std::sqrt(shape);
    EXPECT_NEAR(m.mean, shape, shape * 0.03 * std::max(1.0, cv)) << "shape " << shape;
    EXPECT_NEAR(m.cv, cv, cv * 0.08) << "shape " << shape;
  }
}

TEST(Samplers, TheSameStreamGivesTheSameDraws) {
  base::SplitMix64Stream a(99), b(99);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(GammaDraw(a, 0.3), GammaDraw(b, 0.3));
}

}  // namespace
}  // namespace moelab::serving
