// Golden regression folder for the planners (tests/cli/golden/README.md; the comparison is
// tests/support/golden.h): plan sd (the README's main job), plan hardware, plan offload, sim sd,
// from each cost source.
#include <gtest/gtest.h>

#include "tests/support/golden.h"

namespace moelab::cli {
namespace {

TEST(PlannerGolden, EveryCaseMatchesItsExpectedJson) {
  EXPECT_GE(testing::RunGoldenFolder(MOELAB_CLI_GOLDEN_DIR), 8);
}

}  // namespace
}  // namespace moelab::cli
