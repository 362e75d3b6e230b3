// Expert placements: contiguous blocks, and placement files refused unless every expert is on
// exactly one of the job's ranks.
#include "executor/expert_placement.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::executor {
namespace {

TEST(ExpertPlacement, ContiguousBlocksAndRefusedUnevenSplits) {
  const ExpertPlacement p = ContiguousPlacement(8, 4);
  EXPECT_EQ(p.rank_of_expert, (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(p.ExpertsOf(2), (std::vector<int32_t>{4, 5}));
  EXPECT_THROW(ContiguousPlacement(8, 3), base::Error);
}

class PlacementFile : public ::testing::Test {
 protected:
  std::filesystem::path Write(const std::string& text) {
    const std::filesystem::path file = dir_ / "placement.json";
    std::ofstream(file) << text;
    return file;
  }
  std::string Refusal(const std::string& text, int64_t experts = 4, int ranks = 2) {
    const std::filesystem::path file = Write(text);
    return testing::ErrorOf([&] { LoadPlacement(file, experts, ranks); });
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_ = testing::MakeTempDir("placement");
};

TEST_F(PlacementFile, ReadsEachRanksExperts) {
  const ExpertPlacement p = LoadPlacement(
      Write(R"({"schema": "moelab.expert_placement/1", "ranks": [[3, 0], [1, 2]]})"), 4, 2);
  EXPECT_EQ(p.rank_of_expert, (std::vector<int32_t>{0, 1, 1, 0}));
  // A rank may hold no expert.
  EXPECT_EQ(LoadPlacement(Write(R"({"schema": "moelab.expert_placement/1",
                                    "ranks": [[0, 1, 2, 3], []]})"),
                          4, 2)
                .ExpertsOf(1),
            std::vector<int32_t>{});
}

TEST_F(PlacementFile, RefusesMissingDuplicateAndOutOfRangeExperts) {
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "ranks": [[0, 1], [2]]})")
                .find("expert 3 is on no rank"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "ranks": [[0, 1], [1, 2, 3]]})")
                .find("ranks[1]: expert 1 is already on rank 0"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "ranks": [[0, 1, 4], [2, 3]]})")
                .find("expert id 4 is not in [0, 4)"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "ranks": [[0, 1, 2, 3]]})")
                .find("one per rank"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "other/1", "ranks": [[0, 1], [2, 3]]})").find("schema"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1"})").find("ranks"), std::string::npos);
  // Fields the format does not have, a misspelling among them, are named rather than ignored.
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "rank": [[0, 1], [2, 3]]})")
                .find("field 'rank': unknown (a moelab.expert_placement/1 file holds schema and "
                      "ranks)"),
            std::string::npos);
  EXPECT_NE(Refusal(R"({"schema": "moelab.expert_placement/1", "ranks": [[0, 1], [2, 3]], )"
                    R"("note": "x"})")
                .find("field 'note': unknown"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::executor
