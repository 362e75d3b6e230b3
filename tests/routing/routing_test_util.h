#pragma once

#include <gtest/gtest.h>

#include <string>

#include "model/error.h"

namespace moelab::testing {

// The message of the moelab::Error `action` throws; fails the test when it throws nothing.
template <typename Action>
std::string ErrorOf(Action action) {
  try {
    action();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected moelab::Error";
  return "";
}

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
