// Golden regression folder for `moelab sim offload` (tests/sim/golden/README.md; the comparison
// is tests/support/golden.h).
#include <gtest/gtest.h>

#include "tests/support/golden.h"

namespace moelab::sim {
namespace {

TEST(SimGolden, EveryCaseMatchesItsExpectedJson) {
  EXPECT_GE(testing::RunGoldenFolder(MOELAB_SIM_GOLDEN_DIR), 5);
}

}  // namespace
}  // namespace moelab::sim
