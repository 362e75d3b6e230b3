#include "kernels/elementwise.h"

#include <cmath>
#include <string>

#include "model/error.h"

namespace moelab {

void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * dim;
    float* result = out + r * dim;
    double sum_squares = 0;
    for (int64_t i = 0; i < dim; ++i) sum_squares += static_cast<double>(row[i]) * row[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(sum_squares / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; ++i) result[i] = row[i] * scale * weight[i];
  }
}

void SiluMul(const float* gate, const float* up, int64_t count, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void Axpy(float a, const float* x, int64_t count, float* y) {
  for (int64_t i = 0; i < count; ++i) y[i] += a * x[i];
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

void LogSoftmax(const float* logits, int64_t count, float* out) {
  float max_value = logits[0];
  for (int64_t i = 1; i < count; ++i) max_value = std::max(max_value, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += std::exp(static_cast<double>(logits[i] - max_value));
  const float log_sum = static_cast<float>(std::log(sum)) + max_value;
  for (int64_t i = 0; i < count; ++i) out[i] = logits[i] - log_sum;
}

int64_t ArgMax(const float* values, int64_t count) {
  int64_t best = 0;
  for (int64_t i = 1; i < count; ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

RopeTable::RopeTable(int64_t head_dim, int64_t max_positions, double theta)
    : head_dim_(head_dim), max_positions_(max_positions) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw Error("rotary embedding needs an even head_dim, got " + std::to_string(head_dim));
  }
  const int64_t half = head_dim / 2;
  cos_.resize(static_cast<size_t>(max_positions * half));
  sin_.resize(cos_.size());
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double inverse_frequency = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * inverse_frequency;
      cos_[p * half + i] = static_cast<float>(std::cos(angle));
      sin_[p * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeTable::Apply(float* vectors, int64_t heads, int64_t position) const {
  if (position < 0 || position >= max_positions_) {
    throw Error("position " + std::to_string(position) + " is outside the rotary table (max " +
                std::to_string(max_positions_) + ")");
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

}  // namespace moelab
