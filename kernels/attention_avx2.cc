// AttendHeadGroup compiled for AVX2 (kernels/attention_impl.h; -ffp-contract=off: the same bits
// as every other set).
#include "kernels/attention_impl.h"

namespace moelab::kernels::internal {

void AttendHeadGroupAvx2(const float* q, int64_t heads, const float* keys, const float* values,
                         int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                         int64_t last_visible, float scale, float* scores, float* out) {
  AttendHeadGroupImpl(q, heads, keys, values, kv_stride, head_dim, first_visible, last_visible,
                      scale, scores, out);
}

}  // namespace moelab::kernels::internal
