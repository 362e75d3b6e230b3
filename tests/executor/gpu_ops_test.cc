// Every GPU backend op against the CPU's op on the same inputs, op by op, on odd shapes, with a
// tolerance per op (llama.cpp's test-backend-ops is the model): where the GPU rounds its output to
// bf16 (the next GEMM's input) the CPU result is compared within two bf16 steps. Needs a GPU;
// skips with one line without one.
#include "executor/gpu/gpu_op_check.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/gpu/gpu_transformer.h"
#include "kernels/attention.h"
#include "kernels/bf16.h"
#include "kernels/elementwise.h"
#include "kernels/quantized_activations.h"
#include "kernels/quantized_matrix.h"
#include "tests/executor/gpu_skip.h"

namespace moelab::executor {
namespace {

constexpr double kBf16Step = 1.0 / 128;  // two steps of bf16's 8-bit significand

std::vector<float> Random(size_t count, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-scale, scale);
  std::vector<float> out(count);
  for (float& v : out) v = value(rng);
  return out;
}

float RoundedToBf16(float value) { return kernels::Bf16ToFloat(kernels::FloatToBf16(value)); }

TEST(GpuOps, MatmulMatchesFloat64OnOddShapes) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t rows, out, in;
  };
  for (const Shape& s : {Shape{1, 37, 45}, Shape{5, 37, 45}, Shape{64, 300, 257},
                         Shape{70, 300, 257}, Shape{130, 16, 1024}}) {
    const std::vector<float> w_values = Random(static_cast<size_t>(s.out * s.in), 1 + s.rows);
    std::vector<kernels::Bf16> w_bf16(w_values.size());
    for (size_t i = 0; i < w_values.size(); ++i) w_bf16[i] = kernels::FloatToBf16(w_values[i]);
    const kernels::PackedBf16Matrix w = kernels::PackedBf16Matrix::Pack(w_bf16.data(), s.out, s.in);
    const std::vector<float> x = Random(static_cast<size_t>(s.rows * s.in), 100 + s.rows);
    const std::vector<float> y = gpu_check::Matmul(x, s.rows, w);
    ASSERT_EQ(y.size(), static_cast<size_t>(s.rows * s.out));
    double worst = 0, scale = 0;
    for (int64_t r = 0; r < s.rows; ++r) {
      for (int64_t j = 0; j < s.out; ++j) {
        double reference = 0;  // bf16(x) . w in float64: only the accumulation differs
        for (int64_t k = 0; k < s.in; ++k) {
          reference += static_cast<double>(RoundedToBf16(x[r * s.in + k])) *
                       kernels::Bf16ToFloat(w_bf16[j * s.in + k]);
        }
        worst = std::max(worst, std::fabs(y[r * s.out + j] - reference));
        scale = std::max(scale, std::fabs(reference));
      }
    }
    EXPECT_LT(worst, 1e-5 * scale * std::sqrt(static_cast<double>(s.in)))
        << s.rows << " x " << s.out << " x " << s.in;
  }
}

TEST(GpuOps, RmsNormMatchesTheCpuWithinTwoBf16Steps) {
  SKIP_WITHOUT_GPU();
  for (int64_t width : {12, 45, 1024, 4100}) {
    const int64_t rows = 7;
    const std::vector<float> x = Random(static_cast<size_t>(rows * width), width, 3.0f);
    const std::vector<float> weight = Random(static_cast<size_t>(width), width + 1, 2.0f);
    const std::vector<float> gpu = gpu_check::RmsNormToBf16(x, rows, width, weight, 1e-5f);
    std::vector<float> cpu(x.size());
    kernels::RmsNorm(x.data(), rows, width, weight.data(), 1e-5f, cpu.data());
    for (size_t i = 0; i < cpu.size(); ++i)
      ASSERT_NEAR(gpu[i], cpu[i], kBf16Step * std::fabs(cpu[i]) + 1e-30) << "width " << width;
  }
}

TEST(GpuOps, SoftmaxMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  for (int64_t width : {1, 6, 8, 60, 257}) {
    const int64_t rows = 5;
    const std::vector<float> x = Random(static_cast<size_t>(rows * width), width, 8.0f);
    const std::vector<float> gpu = gpu_check::Softmax(x, rows, width);
    std::vector<float> cpu = x;
    for (int64_t r = 0; r < rows; ++r) kernels::Softmax(cpu.data() + r * width, width);
    for (size_t i = 0; i < cpu.size(); ++i)
      ASSERT_NEAR(gpu[i], cpu[i], 1e-6 + 1e-5 * cpu[i]) << "width " << width;
  }
}

TEST(GpuOps, SwiGluMatchesTheCpuWithinTwoBf16Steps) {
  SKIP_WITHOUT_GPU();
  for (int64_t width : {3, 40, 3584}) {
    const int64_t rows = 4;
    const std::vector<float> gate_up = Random(static_cast<size_t>(rows * 2 * width), width, 6.0f);
    const std::vector<float> gpu = gpu_check::SwiGlu(gate_up, rows, width);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) {
        const double gate = gate_up[r * 2 * width + j];
        const double up = gate_up[r * 2 * width + width + j];
        const double cpu = gate / (1.0 + std::exp(-gate)) * up;
        ASSERT_NEAR(gpu[r * width + j], cpu, kBf16Step * std::fabs(cpu) + 1e-6)
            << "width " << width;
      }
    }
  }
}

TEST(GpuOps, AttentionMatchesTheCpuOnOddShapesAndWindows) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t heads, kv_heads, head_dim, position, window;
  };
  for (const Shape& s :
       {Shape{4, 2, 12, 0, 0}, Shape{6, 3, 20, 37, 0}, Shape{6, 2, 12, 37, 16},
        Shape{16, 4, 64, 300, 0}, Shape{8, 8, 128, 1100, 256}, Shape{40, 2, 32, 70, 0}}) {
    const int64_t kv_width = s.kv_heads * s.head_dim;
    const uint64_t seed = static_cast<uint64_t>(s.position * 31 + s.head_dim);
    const std::vector<float> q = Random(static_cast<size_t>(s.heads * s.head_dim), seed);
    const std::vector<float> keys =
        Random(static_cast<size_t>((s.position + 1) * kv_width), seed + 1);
    const std::vector<float> values =
        Random(static_cast<size_t>((s.position + 1) * kv_width), seed + 2);
    const std::vector<float> gpu = gpu_check::Attention(q, keys, values, s.heads, s.kv_heads,
                                                        s.head_dim, s.position, s.window);
    const int64_t group = s.heads / s.kv_heads;
    const int64_t first = s.window > 0 ? std::max<int64_t>(0, s.position - s.window + 1) : 0;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
    std::vector<float> scores(static_cast<size_t>(s.position + 1));
    std::vector<float> cpu(static_cast<size_t>(s.heads * s.head_dim));
    double magnitude = 0;
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kv_head = h / group;
      kernels::AttendOneHead(q.data() + h * s.head_dim, keys.data() + kv_head * s.head_dim,
                             values.data() + kv_head * s.head_dim, kv_width, s.head_dim, first,
                             s.position, scale, scores.data(), cpu.data() + h * s.head_dim);
    }
    for (float v : cpu) magnitude = std::max(magnitude, static_cast<double>(std::fabs(v)));
    for (size_t i = 0; i < cpu.size(); ++i)
      ASSERT_NEAR(gpu[i], cpu[i], kBf16Step * magnitude)
          << "heads " << s.heads << " head_dim " << s.head_dim << " position " << s.position;
  }
}

// The quantized experts' matmul against float64 over the CPU's quantization of the same normed
// rows (kernels/quantized_activations.h): odd widths (a partial run of 32), rows not a multiple
// of the 8-row groups, more tokens than a block's 8, and token rows read through indices. The
// device's fp32 norm may round an element across a quantization boundary where the CPU's double
// one does not: one step of one element, far below the bound; a wrong layout or scale is O(1).
TEST(GpuOps, QuantizedMatmulMatchesFloat64OverTheCpusQuantization) {
  SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t tokens, out, in;
  };
  for (const kernels::QuantFormat format :
       {kernels::QuantFormat::kQ8_0, kernels::QuantFormat::kQ4_0}) {
    for (const Shape& s :
         {Shape{1, 37, 45}, Shape{5, 300, 257}, Shape{9, 16, 1024}, Shape{20, 64, 96}}) {
      const std::vector<float> w_values = Random(static_cast<size_t>(s.out * s.in), 7 + s.in);
      std::vector<kernels::Bf16> w_bf16(w_values.size());
      for (size_t i = 0; i < w_values.size(); ++i) w_bf16[i] = kernels::FloatToBf16(w_values[i]);
      kernels::QuantizedMatrix w(format, s.out, s.in);
      w.QuantizeRows(0, s.out, w_bf16.data());
      const std::vector<float> x = Random(static_cast<size_t>(s.tokens * s.in), 9 + s.tokens, 2.0f);
      std::vector<int32_t> token_rows;  // every token, last first, then token 0 again
      for (int64_t t = s.tokens - 1; t >= 0; --t) token_rows.push_back(static_cast<int32_t>(t));
      token_rows.push_back(0);
      const std::vector<float> gpu = gpu_check::QuantizedMatmul(x, s.tokens, token_rows, w);
      ASSERT_EQ(gpu.size(), token_rows.size() * static_cast<size_t>(s.out));
      std::vector<float> normed(x.size());
      for (int64_t t = 0; t < s.tokens; ++t) {
        double mean_square = 0;
        for (int64_t k = 0; k < s.in; ++k) mean_square += double{x[t * s.in + k]} * x[t * s.in + k];
        const double scale = 1.0 / std::sqrt(mean_square / static_cast<double>(s.in) + 1e-5);
        for (int64_t k = 0; k < s.in; ++k)
          normed[t * s.in + k] = static_cast<float>(x[t * s.in + k] * scale);
      }
      kernels::QuantizedActivations xq;
      kernels::ResizeQuantizedActivations(s.tokens, s.in, xq);
      kernels::QuantizeActivationTokensScalar(normed.data(), s.in, 0, s.tokens, xq);
      double worst = 0, magnitude = 0;
      for (size_t i = 0; i < token_rows.size(); ++i) {
        for (int64_t n = 0; n < s.out; ++n) {
          double reference = 0;
          for (int64_t k = 0; k < s.in; ++k)
            reference += double{w.At(n, k)} * double{xq.Value(token_rows[i], k)};
          worst = std::max(worst, std::fabs(gpu[i * s.out + n] - reference));
          magnitude = std::max(magnitude, std::fabs(reference));
        }
      }
      EXPECT_LT(worst, 1e-2 * magnitude)
          << kernels::ToString(format) << " " << s.tokens << " x " << s.out << " x " << s.in;
    }
  }
}

// Runs everywhere: without a GPU each op says why it cannot run.
TEST(GpuOps, WithoutAGpuEveryOpSaysWhy) {
  if (GpuUnavailableReason(0).empty()) GTEST_SKIP() << "this machine has a GPU";
  EXPECT_THROW(gpu_check::Softmax({1.0f, 2.0f}, 1, 2), base::Error);
  EXPECT_THROW(gpu_check::SwiGlu({1.0f, 2.0f}, 1, 1), base::Error);
  EXPECT_THROW(gpu_check::QuantizedMatmul(
                   {1.0f}, 1, {0}, kernels::QuantizedMatrix(kernels::QuantFormat::kQ8_0, 1, 1)),
               base::Error);
}

}  // namespace
}  // namespace moelab::executor
