#include "kernels/attention.h"

#include "kernels/attention_impl.h"
#include "kernels/cpu_features.h"

namespace moelab::kernels {

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int64_t head_dim, int64_t first_visible, int64_t last_visible, float scale,
                   float* scores, float* out) {
  AttendHeadGroup(q, 1, keys, values, kv_stride, head_dim, first_visible, last_visible, scale,
                  scores, out);
}

void AttendHeadGroup(const float* q, int64_t heads, const float* keys, const float* values,
                     int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                     int64_t last_visible, float scale, float* scores, float* out) {
  switch (ActiveIsa()) {
    case Isa::kAvx512F:
    case Isa::kAvx512Bf16:
      internal::AttendHeadGroupAvx512F(q, heads, keys, values, kv_stride, head_dim, first_visible,
                                       last_visible, scale, scores, out);
      return;
    case Isa::kAvx2:
      internal::AttendHeadGroupAvx2(q, heads, keys, values, kv_stride, head_dim, first_visible,
                                    last_visible, scale, scores, out);
      return;
    case Isa::kScalar:
      break;
  }
  internal::AttendHeadGroupImpl(q, heads, keys, values, kv_stride, head_dim, first_visible,
                                last_visible, scale, scores, out);
}

}  // namespace moelab::kernels
