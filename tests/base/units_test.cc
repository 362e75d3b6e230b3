// base::ParseBytes: the sizes users write, whole bytes, and the bound's units.
#include "base/units.h"

#include <string>

#include <gtest/gtest.h>

#include "base/error.h"

namespace moelab::base {
namespace {

std::string ErrorOf(const std::string& text) {
  try {
    ParseBytes(text, "--expert-memory");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ParseBytes, TakesDecimalAndBinaryUnitsUpToTheBound) {
  EXPECT_EQ(ParseBytes("24GB", "x"), 24e9);
  EXPECT_EQ(ParseBytes("16 GiB", "x"), 16.0 * 1073741824.0);
  EXPECT_EQ(ParseBytes("25769803776", "x"), 25769803776.0);
  // The bound the refusal names can be written in the unit it names it in.
  EXPECT_EQ(ParseBytes("1EiB", "x"), 0x1p60);
  EXPECT_EQ(ParseBytes("2PB", "x"), 2e15);
  EXPECT_EQ(ParseBytes("1PiB", "x"), 0x1p50);
  // A unit's fraction of a byte is rounded away; a bare count must be whole (1.5 became 1).
  EXPECT_EQ(ParseBytes("1.3KiB", "x"), 1331.0);
  EXPECT_NE(ErrorOf("1.5").find("expected a whole number of bytes"), std::string::npos);
  // Positive as written but under half a byte with its unit: it rounded to a size of 0 (fuzzer).
  EXPECT_NE(ErrorOf("99E-99E").find("less than one byte"), std::string::npos) << ErrorOf("99E-99E");
  EXPECT_NE(ErrorOf("0.0001KB").find("less than one byte"), std::string::npos);
  EXPECT_EQ(ParseBytes("0.001KB", "x"), 1.0);
  EXPECT_NE(ErrorOf("2EiB").find("above the largest size accepted, 1 EiB"), std::string::npos);
  // 1e100 in the message as 1e+100, not a hundred digits.
  EXPECT_NE(ErrorOf("1e100").find("'1e100': 1e+100 bytes"), std::string::npos) << ErrorOf("1e100");
  EXPECT_NE(ErrorOf("lots").find("expected a positive size"), std::string::npos);
}

// "1Gb" is a gigabit where it is written that way; it was read as a gigabyte, a memory 8x what
// was meant, without a word. Refused, saying which byte units to write; all-small units stay bytes.
TEST(ParseBytes, BitUnitsAreRefused) {
  for (const char* bits : {"1Gb", "24 Gb", "512Mb", "16Gib", "2Tb", "8Kb"}) {
    const std::string error = ErrorOf(bits);
    EXPECT_NE(error.find("reads as bits; write a byte unit"), std::string::npos) << bits;
    EXPECT_NE(error.find("--expert-memory"), std::string::npos) << error;
  }
  EXPECT_NE(ErrorOf("1Gb").find("(e.g. GB or GiB)"), std::string::npos) << ErrorOf("1Gb");
  EXPECT_EQ(ParseBytes("24gb", "x"), 24e9);
  EXPECT_EQ(ParseBytes("16gib", "x"), 16.0 * 1073741824.0);
  EXPECT_EQ(ParseBytes("1GB", "x"), 1e9);
}

}  // namespace
}  // namespace moelab::base
