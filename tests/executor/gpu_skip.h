#pragma once

#include <string>

#include <gtest/gtest.h>

#include "executor/gpu/gpu_transformer.h"

// Skips the test with one line saying why when GPU 0 cannot run the backend (no CUDA build, no
// driver, no device).
#define SKIP_WITHOUT_GPU()                                                          \
  do {                                                                              \
    const std::string moelab_why_not = ::moelab::executor::GpuUnavailableReason(0); \
    if (!moelab_why_not.empty()) GTEST_SKIP() << "needs a GPU: " << moelab_why_not; \
  } while (0)
