#pragma once

#include <vector>

#include "executor/weights.h"

namespace moelab::testing {

// A deliberately plain transformer in double precision, written from the definitions (one token
// at a time, full recomputation, no KV cache, no threads), for checking the executor. It rounds
// every matmul input to bf16 as the executor's kernels do, so the two differ only by rounding of
// the accumulation order. Returns logits [tokens][vocab] for the whole sequence.
std::vector<std::vector<double>> ReferenceLogits(const executor::ModelWeights& weights,
                                                 const std::vector<int32_t>& tokens);

}  // namespace moelab::testing
