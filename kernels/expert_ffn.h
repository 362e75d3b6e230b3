#pragma once

#include <cstdint>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/packed_matrix.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_matrix.h"

namespace moelab::kernels {

// One SwiGLU expert (or dense FFN) on `tokens` tokens:
//   out[t] = W_down (silu(W_gate x[t]) * (W_up x[t]))
// gate_up: [2 * intermediate][hidden] bf16, the gate rows then the up rows (one contiguous block,
// so one matmul reads both and an offloaded expert moves as one copy); down:
// [hidden][intermediate] bf16. x: [tokens][hidden] fp32; out: [tokens][hidden] fp32 (overwritten).
struct ExpertFfnScratch {
  std::vector<float> gate_up;
  std::vector<float> hidden;
};

void ExpertFfn(const float* x, int64_t tokens, int64_t hidden, int64_t intermediate,
               const Bf16* gate_up, const Bf16* down, float* out, ThreadPool& pool,
               ExpertFfnScratch& scratch);

// The same on packed weights (what the executor keeps): gate_up [2 * intermediate][hidden] and
// down [hidden][intermediate]. Bit-identical to the row-major call on the same instruction set.
void ExpertFfn(const float* x, int64_t tokens, const PackedBf16Matrix& gate_up,
               const PackedBf16Matrix& down, float* out, ThreadPool& pool,
               ExpertFfnScratch& scratch);

// The same in any weight format (what the executor keeps: bf16 or block-quantized experts).
void ExpertFfn(const float* x, int64_t tokens, const WeightMatrix& gate_up,
               const WeightMatrix& down, float* out, ThreadPool& pool, ExpertFfnScratch& scratch);

// Sizes and touches `scratch` and the calling thread's matmul scratch for calls of up to `tokens`
// tokens on an FFN of this width whose weights are in `format`, so those calls do not take
// first-touch page faults inside their time.
void ReserveExpertFfnScratch(int64_t tokens, int64_t hidden, int64_t intermediate,
                             WeightFormat format, ExpertFfnScratch& scratch);

// Bytes of weights and FLOPs one call reads/does (for bandwidth and FLOP/s counters).
inline double ExpertFfnWeightBytes(int64_t hidden, int64_t intermediate) {
  return 3.0 * static_cast<double>(hidden) * static_cast<double>(intermediate) * 2.0;
}
inline double ExpertFfnFlops(int64_t tokens, int64_t hidden, int64_t intermediate) {
  return 2.0 * 3.0 * static_cast<double>(tokens) * static_cast<double>(hidden) *
         static_cast<double>(intermediate);
}

}  // namespace moelab::kernels
