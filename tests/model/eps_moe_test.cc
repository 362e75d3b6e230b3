#include "model/eps_moe.h"

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::model {
namespace {

TEST(ExpertPipeline, OptimumIsSqrtOfShorterPhaseOverOverhead) {
  const ExpertPipelineModel model{0.004, 0.010, 0.0001, 0.0002};
  EXPECT_NEAR(model.ContinuousOptimum(), std::sqrt(0.004 / 0.0001), 1e-12);  // 6.32
  const int64_t best = model.OptimalPipelines();
  for (int64_t n = 1; n <= 40; ++n) EXPECT_LE(model.Time(best), model.Time(n) + 1e-15) << n;
  EXPECT_NEAR(model.Time(1), 0.010 + 0.004 + 0.0001 + 0.0002, 1e-15);
  // Pipelining helps when the shorter phase is long compared with the overhead.
  EXPECT_LT(model.Time(best), model.Time(1));
}

TEST(ExpertPipeline, RefusesBadInputs) {
  EXPECT_THROW((ExpertPipelineModel{0.004, 0.01, 0.0, 0.0}.OptimalPipelines()), base::Error);
  EXPECT_THROW((ExpertPipelineModel{-0.004, 0.01, 0.001, 0.0}.Time(1)), base::Error);
  EXPECT_THROW((ExpertPipelineModel{0.004, 0.01, 0.001, 0.0}.Time(0)), base::Error);
}

TEST(ExpertGemm, GroupGemmForSmallLoadsDenseForLarge) {
  EXPECT_EQ(ChooseExpertGemm(1), ExpertGemmKind::kGroupGemm);
  EXPECT_EQ(ChooseExpertGemm(2047), ExpertGemmKind::kGroupGemm);
  EXPECT_EQ(ChooseExpertGemm(4096), ExpertGemmKind::kDenseGemm);
  EXPECT_EQ(ChooseExpertGemm(100, 64), ExpertGemmKind::kDenseGemm);
  EXPECT_THROW(ChooseExpertGemm(-1), base::Error);
}

}  // namespace
}  // namespace moelab::model
