#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

namespace moelab::kernels {
namespace {

// q . key over head_dim in kLanes independent partial sums, added pairwise at the end: the sums
// vectorize (a single running sum is one FMA latency per element: the scalar loop held decode
// attention at a long context to about 4 GFLOP/s) and the order is fixed, so the bits do not
// depend on the instruction set the compiler picked.
constexpr int64_t kLanes = 16;

float Dot(const float* q, const float* key, int64_t head_dim) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= head_dim; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += q[i + j] * key[i + j];
  }
  for (int64_t j = 0; i < head_dim; ++i, ++j) lanes[j] += q[i] * key[i];
  for (int64_t width = kLanes / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// scores[p] = exp(scores[p] - max) over the visible positions; returns 1 / their sum.
float Softmax(float* scores, int64_t first_visible, int64_t last_visible, float max_score) {
  double sum = 0;
  for (int64_t p = first_visible; p <= last_visible; ++p) {
    scores[p] = std::exp(scores[p] - max_score);
    sum += scores[p];
  }
  return static_cast<float>(1.0 / sum);
}

}  // namespace

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int64_t head_dim, int64_t first_visible, int64_t last_visible, float scale,
                   float* scores, float* out) {
  AttendHeadGroup(q, 1, keys, values, kv_stride, head_dim, first_visible, last_visible, scale,
                  scores, out);
}

void AttendHeadGroup(const float* q, int64_t heads, const float* keys, const float* values,
                     int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                     int64_t last_visible, float scale, float* scores, float* out) {
  const int64_t positions = last_visible + 1;
  float max_scores[16];
  for (int64_t h0 = 0; h0 < heads; h0 += 16) {
    // Up to 16 heads per pass over the rows (a GQA group is 1-8 heads in practice).
    const int64_t group = std::min<int64_t>(16, heads - h0);
    for (int64_t h = 0; h < group; ++h) max_scores[h] = -INFINITY;
    for (int64_t p = first_visible; p <= last_visible; ++p) {
      const float* key = keys + p * kv_stride;
      for (int64_t h = 0; h < group; ++h) {
        const float score = Dot(q + (h0 + h) * head_dim, key, head_dim) * scale;
        scores[(h0 + h) * positions + p] = score;
        max_scores[h] = std::max(max_scores[h], score);
      }
    }
    float inverse[16];
    for (int64_t h = 0; h < group; ++h) {
      inverse[h] =
          Softmax(scores + (h0 + h) * positions, first_visible, last_visible, max_scores[h]);
      std::fill_n(out + (h0 + h) * head_dim, head_dim, 0.0f);
    }
    for (int64_t p = first_visible; p <= last_visible; ++p) {
      const float* value = values + p * kv_stride;
      for (int64_t h = 0; h < group; ++h) {
        const float weight = scores[(h0 + h) * positions + p] * inverse[h];
        float* o = out + (h0 + h) * head_dim;
        for (int64_t i = 0; i < head_dim; ++i) o[i] += weight * value[i];
      }
    }
  }
}

}  // namespace moelab::kernels
