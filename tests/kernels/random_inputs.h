#pragma once

// Seeded random weights and activations shared by the kernel tests.
#include <cstdint>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

namespace moelab::testing {

// bf16 weights ~ N(0, stddev).
inline std::vector<kernels::Bf16> RandomWeights(int64_t count, uint32_t seed,
                                                float stddev = 0.05f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<kernels::Bf16> w(static_cast<size_t>(count));
  for (kernels::Bf16& v : w) v = kernels::FloatToBf16(normal(rng));
  return w;
}

// fp32 activations ~ N(0, 1).
inline std::vector<float> RandomActivations(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(count));
  for (float& v : x) v = normal(rng);
  return x;
}

// From a fixture's SetUp: makes `isa` the active path, or skips the test on a CPU without it (the
// suites are instantiated over every ISA, so each path's tests run wherever it can).
inline void UseIsaOrSkip(kernels::Isa isa) {
  if (!kernels::IsSupported(isa))
    GTEST_SKIP() << "this CPU cannot run the " << ToString(isa) << " path";
  kernels::SetActiveIsa(isa);
}

}  // namespace moelab::testing
