#include "kernels/expert_ffn.h"

#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/scratch.h"

namespace moelab::kernels {
namespace {

// gate_up(x, y) and down(x, y): the two matmuls on whichever weight layout; the activation between.
template <typename GateUp, typename Down>
void SwiGlu(const float* x, int64_t tokens, int64_t intermediate, ThreadPool& pool,
            ExpertFfnScratch& scratch, const GateUp& gate_up, const Down& down) {
  if (tokens <= 0) return;
  scratch.gate_up.resize(static_cast<size_t>(tokens * 2 * intermediate));
  scratch.hidden.resize(static_cast<size_t>(tokens * intermediate));
  gate_up(x, scratch.gate_up.data());
  // Large batches (prefill) spread the activation over the pool; a few tokens run inline.
  const int64_t tasks = tokens * intermediate >= (int64_t{1} << 16) ? pool.size() : 1;
  pool.Run(tasks, [&](int64_t task, int) {
    for (int64_t t = task * tokens / tasks; t < (task + 1) * tokens / tasks; ++t) {
      const float* row = scratch.gate_up.data() + t * 2 * intermediate;
      SiluMul(row, row + intermediate, intermediate, scratch.hidden.data() + t * intermediate);
    }
  });
  down(scratch.hidden.data());
}

}  // namespace

void ReserveExpertFfnScratch(int64_t tokens, int64_t hidden, int64_t intermediate,
                             WeightFormat format, ExpertFfnScratch& scratch) {
  if (tokens <= 0) return;
  GrowTouched(scratch.gate_up, tokens * 2 * intermediate);
  GrowTouched(scratch.hidden, tokens * intermediate);
  ReserveMatmulScratch(format, tokens, hidden);
  ReserveMatmulScratch(format, tokens, intermediate);
}

void ExpertFfn(const float* x, int64_t tokens, int64_t hidden, int64_t intermediate,
               const Bf16* gate_up, const Bf16* down, float* out, ThreadPool& pool,
               ExpertFfnScratch& scratch) {
  SwiGlu(
      x, tokens, intermediate, pool, scratch,
      [&](const float* in, float* y) {
        MatmulBf16(in, tokens, hidden, gate_up, 2 * intermediate, y, 2 * intermediate, pool);
      },
      [&](const float* in) {
        MatmulBf16(in, tokens, intermediate, down, hidden, out, hidden, pool);
      });
}

void ExpertFfn(const float* x, int64_t tokens, const PackedBf16Matrix& gate_up,
               const PackedBf16Matrix& down, float* out, ThreadPool& pool,
               ExpertFfnScratch& scratch) {
  const int64_t intermediate = down.cols();
  SwiGlu(
      x, tokens, intermediate, pool, scratch,
      [&](const float* in, float* y) {
        MatmulBf16(in, tokens, gate_up, y, 2 * intermediate, pool);
      },
      [&](const float* in) { MatmulBf16(in, tokens, down, out, down.rows(), pool); });
}

void ExpertFfn(const float* x, int64_t tokens, const WeightMatrix& gate_up,
               const WeightMatrix& down, float* out, ThreadPool& pool, ExpertFfnScratch& scratch) {
  const int64_t intermediate = down.cols();
  SwiGlu(
      x, tokens, intermediate, pool, scratch,
      [&](const float* in, float* y) { Matmul(in, tokens, gate_up, y, 2 * intermediate, pool); },
      [&](const float* in) { Matmul(in, tokens, down, out, down.rows(), pool); });
}

}  // namespace moelab::kernels
