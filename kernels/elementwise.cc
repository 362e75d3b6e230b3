#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <bit>
#include <cstring>
#include <string>

#include "base/error.h"
#include "kernels/fast_exp.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace moelab::kernels {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps,
             float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * dim;
    float* result = out + r * dim;
    double sum_squares = 0;
    for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(row[i]) * row[i];
    const float scale =
        static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) result[i] = row[i] * scale * weight[i];
  }
}

using internal::FastExp;

void SiluMul(const float* gate, const float* up, int64_t count, float* out) {
  // Two simple passes per L1-sized chunk vectorize well; GCC 12 leaves the fused loop ~4x slower.
  constexpr int64_t kChunk = 1024;
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t end = std::min(count, begin + kChunk);
    for (int64_t i = begin; i < end; ++i) out[i] = FastExp(-gate[i]);
    for (int64_t i = begin; i < end; ++i) out[i] = gate[i] / (1.0f + out[i]) * up[i];
  }
}

void Axpy(float a, const float* x, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] += a * x[i];
}

void AddTo(const float* x, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] += x[i];
}

void Softmax(float* values, int64_t count) {
  float max_value = values[0];
  for (int64_t i = 1; i < count; ++i) max_value = std::max(max_value, values[i]);
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    values[i] = std::exp(values[i] - max_value);
    sum += values[i];
  }
  const float inverse = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < count; ++i) values[i] *= inverse;
}

float LogSumExp(const float* logits, int64_t count) {
  // Eight running maxima, then theirs: the one-chain loop waited on each comparison (a beam step
  // reads width x vocab logits). The same maximum for any logits without NaN.
  constexpr int64_t kLanes = 8;
  float lane_max[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lane_max[j] = logits[0];
  int64_t i = 1;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lane_max[j] = std::max(lane_max[j], logits[i + j]);
  }
  for (; i < count; ++i) lane_max[0] = std::max(lane_max[0], logits[i]);
  float max_value = lane_max[0];
  for (int64_t j = 1; j < kLanes; ++j) max_value = std::max(max_value, lane_max[j]);
  // The exponentials by FastExp a chunk at a time (vectorized; `out` may be `logits`), summed in
  // double over four interleaved partial sums (a fixed order: the same bits every run). A beam
  // step scores width x vocab candidates, and a libm exp in double per element took 0.5 ms of a
  // 32000-token vocabulary.
  constexpr int64_t kChunk = 256;
  float exps[kChunk];
  double partial[4] = {0, 0, 0, 0};
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t n = std::min(kChunk, count - begin);
    for (int64_t i = 0; i < n; ++i) exps[i] = FastExp(logits[begin + i] - max_value);
    // Element i into partial[i % 4] (chunks are whole multiples of four), written out so that
    // the compiler adds two lanes at a time (`partial[i % 4]` kept it one double add at a time).
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
      partial[0] += static_cast<double>(exps[i]);
      partial[1] += static_cast<double>(exps[i + 1]);
      partial[2] += static_cast<double>(exps[i + 2]);
      partial[3] += static_cast<double>(exps[i + 3]);
    }
    for (; i < n; ++i) partial[i % 4] += static_cast<double>(exps[i]);
  }
  const double sum = (partial[0] + partial[1]) + (partial[2] + partial[3]);
  return static_cast<float>(std::log(sum)) + max_value;
}

void LogSoftmax(const float* logits, int64_t count, float* out) {
  const float log_sum = LogSumExp(logits, count);
  for (int64_t i = 0; i < count; ++i) out[i] = logits[i] - log_sum;
}

int64_t ArgMax(const float* values, int64_t count) {
  // The first index of the largest non-NaN value (0 when values[0] is NaN), as the plain loop
  // `if (values[i] > values[best]) best = i` gives, in two vectorized passes: the maximum, then
  // its first position. The loop took 36 us per row of a 32000-token vocabulary on a Xeon, about
  // a millisecond of a batch-20 GPU decode step spent picking tokens; these passes take 6 us.
  if (count <= 0 || std::isnan(values[0])) return 0;
  float largest = values[0];
  int64_t i = 0;
#if defined(__SSE2__)
  // MAXPS(x, m) is x > m ? x : m: a NaN x leaves m, as the loop skips NaNs.
  __m128 m0 = _mm_set1_ps(largest), m1 = m0, m2 = m0, m3 = m0;
  for (; i + 16 <= count; i += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(values + i), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(values + i + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(values + i + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(values + i + 12), m3);
  }
  float lanes[16];
  _mm_storeu_ps(lanes, m0);
  _mm_storeu_ps(lanes + 4, m1);
  _mm_storeu_ps(lanes + 8, m2);
  _mm_storeu_ps(lanes + 12, m3);
  for (float lane : lanes) largest = lane > largest ? lane : largest;
#endif
  for (; i < count; ++i) largest = values[i] > largest ? values[i] : largest;
  int64_t k = 0;
#if defined(__SSE2__)
  const __m128 target = _mm_set1_ps(largest);
  for (; k + 4 <= count; k += 4) {
    const int equal = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(values + k), target));
    if (equal != 0) return k + std::countr_zero(static_cast<unsigned>(equal));
  }
#endif
  for (; k < count; ++k) {
    if (values[k] == largest) return k;
  }
  return 0;  // not reached: `largest` is one of the values
}

RopeTable::RopeTable(int64_t head_dim, int64_t max_positions, double theta)
    : head_dim_(head_dim), max_positions_(max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw base::Error("rotary embedding needs an even head_dim, got " + std::to_string(head_dim));
  }
  const int64_t half = head_dim / 2;
  cos_.resize(static_cast<size_t>(max_positions * half));
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inverse_frequency =
          std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * inverse_frequency;
      cos_[p * half + i] = static_cast<float>(std::cos(angle));
      sin_[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeTable::Apply(float* vectors, int64_t heads, int64_t position) const {
  if (position < 0 || position >= max_positions_) {
    throw base::Error("position " + std::to_string(position) +
                      " is outside the rotary table (max " + std::to_string(max_positions_) + ")");
  }
  const int64_t half = head_dim_ / 2;
  const float* c = cos_.data() + position * half;
  const float* s = sin_.data() + position * half;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = vectors + h * head_dim_;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
  }
}

}  // namespace moelab::kernels
