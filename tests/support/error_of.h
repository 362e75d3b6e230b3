#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace moelab::testing {

// The message of the moelab::Error `action` throws; fails the test when it throws nothing.
template <typename Action>
std::string ErrorOf(Action action) {
  try {
    action();
  } catch (const base::Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "expected a moelab::Error";
  return "";
}

}  // namespace moelab::testing
