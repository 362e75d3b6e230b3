#include "kernels/attention.h"

#include <cmath>

namespace moelab::kernels {

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int64_t head_dim, int64_t first_visible, int64_t last_visible, float scale,
                   float* scores, float* out) {
  float max_score = -INFINITY;
  for (int64_t p = first_visible; p <= last_visible; ++p) {
    const float* key = keys + p * kv_stride;
    float dot = 0.0f;
    for (int64_t i = 0; i < head_dim; ++i) dot += q[i] * key[i];
    scores[p] = dot * scale;
    max_score = std::max(max_score, scores[p]);
  }
  double sum = 0;
  for (int64_t p = first_visible; p <= last_visible; ++p) {
    scores[p] = std::exp(scores[p] - max_score);
    sum += scores[p];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < head_dim; ++i) out[i] = 0.0f;
  for (int64_t p = first_visible; p <= last_visible; ++p) {
    const float weight = scores[p] * inverse;
    const float* value = values + p * kv_stride;
    for (int64_t i = 0; i < head_dim; ++i) out[i] += weight * value[i];
  }
}

}  // namespace moelab::kernels
