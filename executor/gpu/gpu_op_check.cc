// The GPU backend's ops one at a time on host data (gpu_op_check.h).
#include "executor/gpu/gpu_op_check.h"

#include <cmath>
#include <string>

#include "base/error.h"
#include "executor/gpu/gpu_kernels.h"
#include "executor/gpu/gpu_memory.h"
#include "executor/gpu/gpu_quantized_kernels.h"
#include "executor/gpu/gpu_transformer.h"
#include "kernels/bf16.h"

namespace moelab::executor::gpu_check {
namespace {

using gpu::DeviceArray;
using gpu::Ld;
using gpu::RoundUp;

void RequireGpu() {
  const std::string why_not = GpuUnavailableReason(0);
  if (!why_not.empty()) throw base::Error("GPU op check: " + why_not);
  MOELAB_CUDA_CHECK(cudaSetDevice(0));
}

// Host rows [rows][width] into `ld`-strided rows.
template <typename T>
std::vector<T> Strided(const std::vector<T>& rows_in, int64_t rows, int64_t width, int64_t ld,
                       int64_t padded_rows) {
  std::vector<T> out(static_cast<size_t>(padded_rows * ld), T{});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j) out[r * ld + j] = rows_in[r * width + j];
  }
  return out;
}

template <typename T>
std::vector<T> Download(const DeviceArray<T>& device, int64_t count) {
  MOELAB_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> host(static_cast<size_t>(count));
  MOELAB_CUDA_CHECK(cudaMemcpy(host.data(), device.get(), static_cast<size_t>(count) * sizeof(T),
                               cudaMemcpyDeviceToHost));
  return host;
}

// [rows][width] out of `ld`-strided bf16 rows, as float.
std::vector<float> Bf16Rows(const std::vector<uint16_t>& strided, int64_t rows, int64_t width,
                            int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j)
      out[r * width + j] = kernels::Bf16ToFloat(strided[r * ld + j]);
  }
  return out;
}

}  // namespace

std::vector<float> Matmul(const std::vector<float>& x, int64_t rows,
                          const kernels::PackedBf16Matrix& w) {
  RequireGpu();
  const int64_t k = w.cols();
  const int64_t n = w.rows();
  const int64_t padded = RoundUp(rows, kGpuGemmRows);
  std::vector<kernels::Bf16> w_rows(static_cast<size_t>(n * k));
  w.UnpackRows(0, n, w_rows.data());
  DeviceArray<uint16_t> weights;
  weights.Upload(Strided(w_rows, n, k, Ld(k), n));
  std::vector<uint16_t> x_bf16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = kernels::FloatToBf16(x[i]);
  DeviceArray<uint16_t> input;
  input.Upload(Strided(x_bf16, rows, k, Ld(k), padded));
  DeviceArray<float> output(padded * Ld(n));
  cublasHandle_t cublas = nullptr;
  MOELAB_CUBLAS_CHECK(cublasCreate(&cublas));
  try {
    gpu::GemmRowBlocks(cublas, {weights.get(), n, k, Ld(k)}, input.get(), Ld(k), padded,
                       output.get(), Ld(n));
  } catch (...) {
    cublasDestroy(cublas);
    throw;
  }
  const std::vector<float> strided = Download(output, padded * Ld(n));
  cublasDestroy(cublas);
  std::vector<float> y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = strided[r * Ld(n) + j];
  }
  return y;
}

std::vector<float> RmsNormToBf16(const std::vector<float>& x, int64_t rows, int64_t width,
                                 const std::vector<float>& weight, float eps) {
  RequireGpu();
  DeviceArray<float> input, scale;
  input.Upload(Strided(x, rows, width, Ld(width), rows));
  scale.Upload(weight);
  DeviceArray<uint16_t> output(rows * Ld(width));
  gpu::RmsNormToBf16(input.get(), Ld(width), nullptr, rows, width, scale.get(), eps, output.get(),
                     Ld(width), nullptr);
  return Bf16Rows(Download(output, rows * Ld(width)), rows, width, Ld(width));
}

std::vector<float> Softmax(const std::vector<float>& x, int64_t rows, int64_t width) {
  RequireGpu();
  DeviceArray<float> values;
  values.Upload(Strided(x, rows, width, Ld(width), rows));
  gpu::SoftmaxRows(values.get(), Ld(width), rows, width, nullptr);
  const std::vector<float> strided = Download(values, rows * Ld(width));
  std::vector<float> out(static_cast<size_t>(rows * width));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < width; ++j) out[r * width + j] = strided[r * Ld(width) + j];
  }
  return out;
}

std::vector<float> SwiGlu(const std::vector<float>& gate_up, int64_t rows, int64_t width) {
  RequireGpu();
  DeviceArray<float> input;
  input.Upload(Strided(gate_up, rows, 2 * width, Ld(2 * width), rows));
  DeviceArray<uint16_t> output(rows * Ld(width));
  gpu::SwiGlu(input.get(), Ld(2 * width), rows, width, output.get(), Ld(width), nullptr);
  return Bf16Rows(Download(output, rows * Ld(width)), rows, width, Ld(width));
}

std::vector<float> Attention(const std::vector<float>& q, const std::vector<float>& keys,
                             const std::vector<float>& values, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, int64_t position, int64_t sliding_window) {
  RequireGpu();
  const int64_t q_width = heads * head_dim;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t capacity = position + 1;
  if (static_cast<int64_t>(q.size()) != q_width ||
      static_cast<int64_t>(keys.size()) != capacity * kv_width || keys.size() != values.size()) {
    throw base::Error("GPU op check: attention inputs of the wrong size");
  }
  // The q row of a q|k|v projection (only q is read), one cache of `capacity` positions.
  const int64_t ld_qkv = Ld(q_width + 2 * kv_width);
  std::vector<float> qkv(static_cast<size_t>(ld_qkv), 0.0f);
  std::copy(q.begin(), q.end(), qkv.begin());
  DeviceArray<float> qkv_device, keys_device, values_device;
  qkv_device.Upload(qkv);
  keys_device.Upload(keys);
  values_device.Upload(values);
  DeviceArray<float*> key_base, value_base;
  key_base.Upload(std::vector<float*>{keys_device.get()});
  value_base.Upload(std::vector<float*>{values_device.get()});
  DeviceArray<int64_t> capacities;
  capacities.Upload(std::vector<int64_t>{capacity});
  DeviceArray<int32_t> positions;
  positions.Upload(std::vector<int32_t>{static_cast<int32_t>(position)});
  const int64_t first =
      sliding_window > 0 ? std::max<int64_t>(0, position - sliding_window + 1) : 0;
  const int64_t visible = position - first + 1;
  DeviceArray<float> scratch(gpu::AttentionScratchFloats(1, heads, head_dim, visible));
  DeviceArray<uint16_t> output(Ld(q_width));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  gpu::Attention(qkv_device.get(), ld_qkv, 1, heads, kv_heads, head_dim, sliding_window, scale,
                 {key_base.get(), value_base.get(), capacities.get(), positions.get()}, 0, visible,
                 scratch.get(), output.get(), Ld(q_width), nullptr);
  return Bf16Rows(Download(output, Ld(q_width)), 1, q_width, Ld(q_width));
}

std::vector<float> QuantizedMatmul(const std::vector<float>& x, int64_t tokens,
                                   const std::vector<int32_t>& token_rows,
                                   const kernels::QuantizedMatrix& w) {
  RequireGpu();
  const int64_t width = w.cols();
  if (static_cast<int64_t>(x.size()) != tokens * width)
    throw base::Error("GPU op check: quantized matmul input of the wrong size");
  DeviceArray<float> x_device, ones;
  x_device.Upload(Strided(x, tokens, width, Ld(width), tokens));
  ones.Upload(std::vector<float>(static_cast<size_t>(width), 1.0f));
  const int64_t runs = gpu::QuantizedRuns(width);
  DeviceArray<int8_t> quants(tokens * runs * 32);
  DeviceArray<float> scales(tokens * runs);
  gpu::RmsNormQuantize(x_device.get(), Ld(width), tokens, width, ones.get(), 1e-5f, quants.get(),
                       scales.get(), nullptr);
  DeviceArray<uint8_t> records;
  records.Upload(w.data(), w.storage_bytes());
  DeviceArray<int32_t> rows_device;
  rows_device.Upload(token_rows);
  const int64_t rows = static_cast<int64_t>(token_rows.size());
  DeviceArray<float> y(rows * Ld(w.rows()));
  gpu::QuantizedMatmul({records.get(), w.rows(), width, w.format() == kernels::QuantFormat::kQ4_0},
                       quants.get(), scales.get(), rows_device.get(), rows, y.get(), Ld(w.rows()),
                       nullptr);
  const std::vector<float> strided = Download(y, rows * Ld(w.rows()));
  std::vector<float> out(static_cast<size_t>(rows * w.rows()));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t n = 0; n < w.rows(); ++n) out[i * w.rows() + n] = strided[i * Ld(w.rows()) + n];
  }
  return out;
}

}  // namespace moelab::executor::gpu_check
