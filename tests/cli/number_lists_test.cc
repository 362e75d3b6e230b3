#include "base/number_lists.h"

#include <gtest/gtest.h>

#include "tests/support/error_of.h"

namespace moelab::cli {
namespace {

TEST(NumberLists, IntegerListsRangesAndGeometricRanges) {
  EXPECT_EQ(base::ParseIntList("1,2,4", "batch", 1), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(base::ParseIntList("1-4", "gamma", 1), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(base::ParseIntList("1-64:x4", "batch", 1), (std::vector<int64_t>{1, 4, 16, 64}));
  EXPECT_EQ(base::ParseIntList("1,3-4", "batch", 0), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseIntList("0,2", "batch", 1);
            }).find("--batch '0,2': 0 is below 1"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseIntList("4-2", "batch", 1);
            }).find("range end below its start"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] { base::ParseIntList("1-8:x1", "batch", 1); }).find("at least 2"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] { base::ParseIntList("1,,2", "batch", 1); }).find("empty item"),
            std::string::npos);
  EXPECT_NE(
      testing::ErrorOf([] { base::ParseIntList("a", "batch", 1); }).find("'a' is not an integer"),
      std::string::npos);
}

TEST(NumberLists, NumbersAndNumberLists) {
  EXPECT_EQ(base::ParseNumber("0.25", "alpha"), 0.25);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumber("abc", "alpha");
            }).find("--alpha 'abc': expected a finite number"),
            std::string::npos);
  EXPECT_NE(
      testing::ErrorOf([] { base::ParseNumber("1x", "alpha"); }).find("expected a finite number"),
      std::string::npos);
  EXPECT_NE(
      testing::ErrorOf([] { base::ParseNumber("inf", "alpha"); }).find("expected a finite number"),
      std::string::npos);
  EXPECT_EQ(base::ParseNumberList("0.6,0.8", "alpha"), (std::vector<double>{0.6, 0.8}));
  const std::vector<double> stepped = base::ParseNumberList("0.5:0.9:0.1", "alpha");
  ASSERT_EQ(stepped.size(), 5u);  // stop included within rounding
  EXPECT_DOUBLE_EQ(stepped.back(), 0.9);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumberList("0.9:0.5:0.1", "alpha");
            }).find("start:stop:step"),
            std::string::npos);
}

// Found by fuzz/int_list_fuzz.cc: a step count beyond int64 was cast from double (undefined; on x86
// it became negative and the list came back empty, exit 0).
// Every listed value is a row or a point: one listed twice gave its row twice, read as two
// settings. Refused, naming the value, however it was written (a range over a listed value, 0.80
// beside 0.8).
TEST(NumberLists, AValueListedTwiceIsRefused) {
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseIntList("4,2,4", "batch", 1);
            }).find("--batch '4,2,4': 4 is listed twice"),
            std::string::npos);
  EXPECT_NE(
      testing::ErrorOf([] { base::ParseIntList("1-8,4", "batch", 1); }).find("4 is listed twice"),
      std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseIntList("1-16:x2,8", "gamma", 1);
            }).find("8 is listed twice"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumberList("0.6,0.8,0.80", "alpha");
            }).find("--alpha '0.6,0.8,0.80': 0.8 is listed twice"),
            std::string::npos);
  EXPECT_EQ(base::ParseIntList("8,1,4", "batch", 1),
            (std::vector<int64_t>{8, 1, 4}));  // order kept
}

// A trailing comma was dropped ("1,2," read as 1,2) while a leading one was refused.
TEST(NumberLists, ATrailingCommaIsAnEmptyItem) {
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseIntList("1,2,", "batch", 1);
            }).find("--batch '1,2,': empty item"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumberList("0.6,0.8,", "alpha");
            }).find("--alpha '0.6,0.8,': empty item"),
            std::string::npos);
}

TEST(NumberLists, HugeStepCountsAreRefused) {
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumberList(".5:1e300:1e-300", "alpha");
            }).find("more than 100000 values"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([] {
              base::ParseNumberList("-1e308:1e308:1", "alpha");
            }).find("more than 100000 values"),
            std::string::npos);
}

// A geometric range up to the int64 maximum stops at its last value instead of overflowing.
TEST(NumberLists, GeometricRangeToInt64MaxDoesNotOverflow) {
  const std::vector<int64_t> values = base::ParseIntList("1-9223372036854775807:x2", "batch", 1);
  ASSERT_EQ(values.size(), 63u);
  EXPECT_EQ(values.back(), int64_t{1} << 62);
  EXPECT_EQ(base::ParseIntList("9223372036854775806-9223372036854775807", "batch", 1).size(), 2u);
}

// Option text quoted in a message is escaped: no terminal escape sequence reaches stderr.
TEST(NumberLists, MessagesEscapeControlBytes) {
  for (const std::string& message :
       {testing::ErrorOf([] { base::ParseNumber("\x1b[2J", "alpha"); }),
        testing::ErrorOf([] { base::ParseIntList("1,\x1b[2J", "batch", 1); }),
        testing::ErrorOf([] { base::ParseNumberList("1:\x1b:1", "alpha"); })}) {
    EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
    EXPECT_NE(message.find("\\x1b"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace moelab::cli
