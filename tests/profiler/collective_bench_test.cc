// The collectives' grid (message sizes from the model's shape) and the profile schema's collective
// samples: accepted as profile --collectives writes them, refused by field when malformed.
#include "profiler/collective_bench.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/json_reader.h"
#include "profiler/profiler.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

TEST(CollectiveGrid, SizesFollowTheExecutorsDispatchAndCombine) {
  CollectiveGridSpec spec = CollectiveGridSpec::Quick();
  spec.tokens_per_rank = {1, 7};
  // hidden 100, top-2, 4 ranks: ceil(t x 2 / 4) rows to each of 3 peers.
  const std::vector<CollectivePoint> points = MakeCollectiveGrid(100, 2, 4, spec);
  ASSERT_EQ(points.size(), 6u);
  EXPECT_EQ(points[0].op, "all_to_all");
  EXPECT_EQ(points[0].message, "dispatch");
  EXPECT_EQ(points[0].rows_per_peer, 1);
  EXPECT_EQ(points[0].bytes, 3 * 1 * 101 * 4);
  EXPECT_EQ(points[1].message, "combine");
  EXPECT_EQ(points[1].bytes, 3 * 1 * 100 * 4);
  EXPECT_EQ(points[2].op, "all_reduce");
  EXPECT_EQ(points[2].bytes, 400);
  EXPECT_EQ(points[3].rows_per_peer, 4);  // ceil(14 / 4)
  EXPECT_EQ(points[3].bytes, 3 * 4 * 101 * 4);
  EXPECT_EQ(points[5].bytes, 7 * 100 * 4);
  // An all-reduce sums doubles: 3 fp32 values (12 bytes) take two.
  spec.tokens_per_rank = {1};
  EXPECT_EQ(MakeCollectiveGrid(3, 1, 2, spec)[2].bytes, 16);
}

TEST(CollectiveGrid, RefusesOneRankAndBadSpecs) {
  EXPECT_THROW(MakeCollectiveGrid(64, 2, 1, CollectiveGridSpec::Quick()), base::Error);
  CollectiveGridSpec spec = CollectiveGridSpec::Quick();
  spec.repetitions = 0;
  EXPECT_THROW(spec.Validate(), base::Error);
  spec = CollectiveGridSpec::Quick();
  spec.tokens_per_rank = {0};
  EXPECT_THROW(spec.Validate(), base::Error);
  // A message past MPI's int counts is refused, naming it.
  spec.tokens_per_rank = {int64_t{1} << 24};
  try {
    MakeCollectiveGrid(65536, 8, 2, spec);
    FAIL() << "a message over 2^31 bytes per peer was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("MPI's int counts"), std::string::npos) << e.what();
  }
}

nlohmann::json CollectiveSample() {
  return {{"operator", "all_to_all"},
          {"device", "mpi"},
          {"shape", {{"ranks", 2}, {"bytes", 4100}}},
          {"tokens", 1},
          {"repetitions", 3},
          {"iterations", 10},
          {"median_s", 2e-5},
          {"mean_s", 2e-5},
          {"min_s", 1e-5},
          {"max_s", 3e-5},
          {"stddev_s", 1e-6},
          {"repetition_s", {1e-5, 2e-5, 3e-5}},
          {"bytes", 4100},
          {"flops", 0}};
}

TEST(CollectiveSamples, AcceptedInAProfileAndRefusedByField) {
  nlohmann::json profile =
      base::JsonReader::ParseFile(testing::TestDataDir() / "profiles/quick-cpu.json");
  profile["samples"].push_back(CollectiveSample());
  EXPECT_NO_THROW(ValidateProfile(profile));
  const auto refused = [&](const char* key, const nlohmann::json& value, const char* field) {
    nlohmann::json bad = profile;
    nlohmann::json& sample = bad["samples"].back();
    if (std::string(key) == "ranks") {
      sample["shape"]["ranks"] = value;
    } else {
      sample[key] = value;
    }
    try {
      ValidateProfile(bad);
      ADD_FAILURE() << key << " accepted";
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  refused("device", "cpu", "device");
  refused("ranks", 1, "shape.ranks");
  refused("bytes", 8000, "shape.bytes");
  refused("tokens", 2, "tokens");
}

}  // namespace
}  // namespace moelab::profiler
