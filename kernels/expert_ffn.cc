#include "kernels/expert_ffn.h"

#include "kernels/elementwise.h"
#include "kernels/matmul.h"

namespace moelab {

void ExpertFfn(const float* x, int64_t tokens, int64_t hidden, int64_t intermediate,
               const Bf16* gate_up, const Bf16* down, float* out, ThreadPool& pool,
               ExpertFfnScratch& scratch) {
  if (tokens <= 0) return;
  scratch.gate_up.resize(static_cast<size_t>(tokens * 2 * intermediate));
  scratch.hidden.resize(static_cast<size_t>(tokens * intermediate));
  MatmulBf16(x, tokens, hidden, gate_up, 2 * intermediate, scratch.gate_up.data(), 2 * intermediate, pool);
  // Large batches (prefill) spread the activation over the pool; a few tokens run inline.
  const int64_t tasks = tokens * intermediate >= (int64_t{1} << 16) ? pool.size() : 1;
  pool.Run(tasks, [&](int64_t task, int) {
    for (int64_t t = task * tokens / tasks; t < (task + 1) * tokens / tasks; ++t) {
      const float* row = scratch.gate_up.data() + t * 2 * intermediate;
      SiluMul(row, row + intermediate, intermediate, scratch.hidden.data() + t * intermediate);
    }
  });
  MatmulBf16(scratch.hidden.data(), tokens, intermediate, down, hidden, out, hidden, pool);
}

}  // namespace moelab
