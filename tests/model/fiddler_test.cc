#include "model/fiddler.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

// Mixtral-like: copying an expert costs 3x the GPU compute (Fiddler's microbenchmarks: 2-5x).
const FiddlerLatencyModel kModel{0.001, 0.002, 0.0005, 0.0015};

TEST(FiddlerDecide, FollowsAlgorithm1) {
  EXPECT_EQ(FiddlerDecide(kModel, 0, false), ExpertExecution::kSkip);
  EXPECT_EQ(FiddlerDecide(kModel, 0, true), ExpertExecution::kSkip);
  EXPECT_EQ(FiddlerDecide(kModel, 5, true), ExpertExecution::kGpuResident);
  // cpu(1) = 0.003 > 0.002 = gpu + transfer? yes -> copy.
  EXPECT_EQ(FiddlerDecide({0.001, 0.0005, 0.0005, 0.0015}, 1, false), ExpertExecution::kCpu);
  EXPECT_EQ(FiddlerDecide(kModel, 1, false), ExpertExecution::kCopyWeightsThenGpu);
  EXPECT_THROW(FiddlerDecide(kModel, -1, false), base::Error);
}

TEST(FiddlerDecide, CrossoverSeparatesCpuFromCopy) {
  const FiddlerLatencyModel model{0.0002, 0.0004, 0.0005, 0.0030};
  const int64_t crossover = FiddlerCrossoverTokens(model);
  EXPECT_EQ(crossover, 9);  // cpu(s) = 0.0002 + 0.0004 s > 0.0035  <=>  s > 8.25
  EXPECT_EQ(FiddlerDecide(model, crossover - 1, false), ExpertExecution::kCpu);
  EXPECT_EQ(FiddlerDecide(model, crossover, false), ExpertExecution::kCopyWeightsThenGpu);
  EXPECT_DOUBLE_EQ(FiddlerExpertLatency(model, crossover, false), 0.0035);
  EXPECT_DOUBLE_EQ(FiddlerExpertLatency(model, 2, false), 0.0002 + 0.0008);
  EXPECT_EQ(FiddlerCrossoverTokens({0.001, 0.0, 0.0005, 0.003}), -1);
  EXPECT_THROW(FiddlerCrossoverTokens({-0.001, 0.001, 0.0005, 0.003}), base::Error);
}

TEST(Placement, MostPopularFirstDeterministicTies) {
  const PopularityTable table = {{5, 1, 3}, {3, 9, 0}};
  const std::vector<ExpertId> best = PlaceByPopularity(table, 3);
  ASSERT_EQ(best.size(), 3u);
  EXPECT_EQ(best[0], (ExpertId{1, 1}));
  EXPECT_EQ(best[1], (ExpertId{0, 0}));
  EXPECT_EQ(best[2], (ExpertId{0, 2}));  // tie with (1, 0): lower layer first
  EXPECT_NEAR(ExpectedHitRate(table, best), 17.0 / 21.0, 1e-12);
  EXPECT_NEAR(ExpectedHitRate(table, PlaceLeastPopular(table, 2)), 1.0 / 21.0, 1e-12);
  EXPECT_EQ(PlaceByPopularity(table, 100).size(), 6u);
  EXPECT_DOUBLE_EQ(ExpectedHitRate(table, PlaceByPopularity(table, 100)), 1.0);
  EXPECT_THROW(ExpectedHitRate(table, {{2, 0}}), base::Error);
}

TEST(Placement, RealMixtralPopularityBoundsRandomPlacement) {
  const std::filesystem::path csv =
      testing::SharedDataDir() / "routing/mixtral-8x7b/fiddler_mixtral_popularity_aggregated.csv";
  if (!std::filesystem::exists(csv)) GTEST_SKIP() << "shared routing data not present: " << csv;
  const PopularityTable table = LoadPopularityTable(csv.string());
  ASSERT_EQ(table.size(), 32u);
  ASSERT_EQ(table[0].size(), 8u);
  for (int64_t capacity : {56, 125}) {
    const double best = ExpectedHitRate(table, PlaceByPopularity(table, capacity));
    const double worst = ExpectedHitRate(table, PlaceLeastPopular(table, capacity));
    const double random = RandomPlacementHitRate(table, capacity);
    EXPECT_GT(best, random);
    EXPECT_LT(worst, random);
    EXPECT_DOUBLE_EQ(random, static_cast<double>(capacity) / 256.0);
  }
  // The data's README: the 56 most popular of 256 cover about 25.7 % of activations.
  EXPECT_NEAR(ExpectedHitRate(table, PlaceByPopularity(table, 56)), 0.257, 0.005);
}

TEST(Placement, LoadErrorsNameTheFile) {
  const std::filesystem::path dir = testing::MakeTempDir("popularity");
  const std::filesystem::path bad = dir / "bad.csv";
  {
    std::ofstream out(bad);
    out << "layer,e0,e1\n0,1,2\n1,3,x\n";
  }
  try {
    LoadPopularityTable(bad.string());
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.csv: line 3"), std::string::npos) << e.what();
  }
  const std::filesystem::path ragged = dir / "ragged.csv";
  {
    std::ofstream out(ragged);
    out << "layer,e0,e1\n0,1,2\n1,3\n";
  }
  EXPECT_THROW(LoadPopularityTable(ragged.string()), base::Error);
}

}  // namespace
}  // namespace moelab::model
