#pragma once

#include <cstdint>
#include <vector>

namespace moelab::kernels {

// Row-wise RMSNorm: out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight. In place allowed.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);

// SwiGLU: out[i] = silu(gate[i]) * up[i].
void SiluMul(const float* gate, const float* up, int64_t count, float* out);

// y[i] += a * x[i].
void Axpy(float a, const float* x, int64_t count, float* y);

// y[i] += x[i]: a residual add (the executor's, and what the profiler's norms_residual times).
void AddTo(const float* x, int64_t count, float* y);

// In-place numerically stable softmax; returns nothing. LogSoftmax writes log-probabilities.
void Softmax(float* values, int64_t count);
void LogSoftmax(const float* logits, int64_t count, float* out);
// log(sum(exp(logits))) as LogSoftmax computes it: its out[i] is logits[i] - LogSumExp(...), the
// same float, so a caller that reads a few log-probabilities need not write them all.
float LogSumExp(const float* logits, int64_t count);

// Index of the largest value (the first one on ties), for greedy decoding.
int64_t ArgMax(const float* values, int64_t count);

// Rotary position embedding, Hugging Face "rotate_half" layout (Llama, Mixtral, Qwen): within each
// head, element i pairs with i + head_dim / 2. Angles from a precomputed table.
class RopeTable {
 public:
  RopeTable() = default;
  RopeTable(int64_t head_dim, int64_t max_positions, double theta);
  // Rotates `heads` vectors of head_dim at `position` in place.
  void Apply(float* vectors, int64_t heads, int64_t position) const;
  int64_t max_positions() const { return max_positions_; }
  // [position][head_dim / 2]: what a device backend uploads to rotate exactly as Apply does.
  const std::vector<float>& cos_table() const { return cos_; }
  const std::vector<float>& sin_table() const { return sin_; }

 private:
  int64_t head_dim_ = 0;
  int64_t max_positions_ = 0;
  std::vector<float> cos_;  // [position][head_dim / 2]
  std::vector<float> sin_;
};

}  // namespace moelab::kernels
