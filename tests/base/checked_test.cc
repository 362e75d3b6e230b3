#include "base/checked.h"

#include <cstdint>

#include <gtest/gtest.h>

#include "tests/support/error_of.h"

namespace moelab::base {
namespace {

TEST(Checked, ProductsAndSumsThatFitAreExact) {
  EXPECT_EQ(CheckedMul(4096, 14336, "expert bytes"), 4096LL * 14336);
  EXPECT_EQ(CheckedAdd(INT64_MAX - 1, 1, "bytes"), INT64_MAX);
  EXPECT_EQ(CheckedProduct("x", 3, 4096, 14336, 2), 3LL * 4096 * 14336 * 2);
}

TEST(Checked, OverflowIsAnErrorNamingTheQuantity) {
  const std::string error = testing::ErrorOf([] { CheckedMul(INT64_MAX, 2, "total parameters"); });
  EXPECT_NE(error.find("total parameters: 9223372036854775807 x 2 overflows"), std::string::npos)
      << error;
  EXPECT_NE(testing::ErrorOf([] { CheckedAdd(INT64_MAX, 1, "weight bytes"); }).find("weight bytes"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              CheckedProduct("layers", int64_t{1} << 40, int64_t{1} << 30);
            }).find("layers"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::base
