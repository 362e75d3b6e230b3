#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "tests/support/error_of.h"

namespace moelab::testing {

// For EXPECT_PRED_FORMAT2: `text` contains `part`.
inline ::testing::AssertionResult ContainsFormat(const char* text_expression,
                                                 const char* part_expression,
                                                 const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text_expression << " does not contain " << part_expression
                                       << "\n  text: " << text << "\n  part: " << part;
}

}  // namespace moelab::testing

#define EXPECT_CONTAINS(text, part) \
  EXPECT_PRED_FORMAT2(::moelab::testing::ContainsFormat, text, part)
