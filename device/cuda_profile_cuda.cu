// GPU measurements for the profiler (CUDA build). Every CUDA and cuBLAS call goes through
// MOELAB_CUDA_CHECK / MOELAB_CUBLAS_CHECK, which throw GpuError naming the call and the line.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "device/cuda_check.h"
#include "device/cuda_profile.h"

namespace moelab::device {
namespace {

using Bf16 = __nv_bfloat16;
using Clock = std::chrono::steady_clock;

// out[t][j] = silu(gate_up[t][j]) * gate_up[t][width + j] (the gate columns, then the up columns).
__global__ void SiluMul(const Bf16* gate_up, int64_t tokens, int64_t width, Bf16* out) {
  const int64_t total = tokens * width;
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += stride) {
    const int64_t t = i / width;
    const int64_t j = i % width;
    const float gate = __bfloat162float(gate_up[t * 2 * width + j]);
    const float up = __bfloat162float(gate_up[t * 2 * width + width + j]);
    out[i] = __float2bfloat16(gate / (1.0f + __expf(-gate)) * up);
  }
}

int GridFor(int64_t count) {
  return static_cast<int>(std::clamp<int64_t>((count + 255) / 256, 1, 4096));
}

// A device allocation freed on scope exit.
struct DeviceBuffer {
  void* data = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    MOELAB_CUDA_CHECK(cudaMalloc(&data, std::max<size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

// y [tokens][n_out] = x [tokens][k] . w^T with w [n_out][k], all row-major bf16, fp32 compute.
// Row-major y^T is column-major y (n_out x tokens) = op_T(w as k x n_out) . (x as k x tokens).
void Gemm(cublasHandle_t handle, const Bf16* w, int64_t n_out, int64_t k, const Bf16* x,
          int64_t tokens, Bf16* y) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  MOELAB_CUBLAS_CHECK(
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_out),
                   static_cast<int>(tokens), static_cast<int>(k), &alpha, w, CUDA_R_16BF,
                   static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(k), &beta, y, CUDA_R_16BF,
                   static_cast<int>(n_out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// The expert FFN on one weight block (gate/up rows then down rows) into `out`.
void ExpertFfnOnDevice(cublasHandle_t handle, cudaStream_t stream, const Bf16* block,
                       int64_t hidden, int64_t intermediate, const Bf16* x, int64_t tokens,
                       Bf16* gate_up_out, Bf16* activation, Bf16* out) {
  Gemm(handle, block, 2 * intermediate, hidden, x, tokens, gate_up_out);
  SiluMul<<<GridFor(tokens * intermediate), 256, 0, stream>>>(gate_up_out, tokens, intermediate,
                                                              activation);
  MOELAB_CUDA_CHECK(cudaGetLastError());
  Gemm(handle, block + 2 * intermediate * hidden, hidden, intermediate, activation, tokens, out);
}

}  // namespace

struct GpuProfileSession::Impl {
  int device = 0;
  int64_t transfer_bytes = 0;
  cudaStream_t stream = nullptr;
  void* device_buffer = nullptr;
  void* pinned = nullptr;
  void* pageable = nullptr;
  // Destruction never throws: errors here cannot be acted on.
  ~Impl() {
    if (device_buffer) cudaFree(device_buffer);
    if (pinned) cudaFreeHost(pinned);
    std::free(pageable);
    if (stream) cudaStreamDestroy(stream);
  }

  double Copy(int64_t bytes, bool to_device, bool use_pinned) {
    if (bytes < 1 || bytes > transfer_bytes) {
      throw GpuError("copy of " + std::to_string(bytes) + " bytes outside the session's 1.." +
                     std::to_string(transfer_bytes));
    }
    void* host = use_pinned ? pinned : pageable;
    const Clock::time_point begin = Clock::now();
    if (to_device) {
      MOELAB_CUDA_CHECK(cudaMemcpyAsync(device_buffer, host, static_cast<size_t>(bytes),
                                        cudaMemcpyHostToDevice, stream));
    } else {
      MOELAB_CUDA_CHECK(cudaMemcpyAsync(host, device_buffer, static_cast<size_t>(bytes),
                                        cudaMemcpyDeviceToHost, stream));
    }
    MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream));
    return std::chrono::duration<double>(Clock::now() - begin).count();
  }
};

std::string CublasVersion() {
  int major = 0;
  int minor = 0;
  int patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(MINOR_VERSION, &minor) != CUBLAS_STATUS_SUCCESS ||
      cublasGetProperty(PATCH_LEVEL, &patch) != CUBLAS_STATUS_SUCCESS) {
    return "";
  }
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

GpuProfileSession::GpuProfileSession(int device_index, int64_t transfer_bytes)
    : impl_(std::make_unique<Impl>()) {
  if (transfer_bytes < 1) throw GpuError("GPU session: transfer_bytes must be >= 1");
  Impl& s = *impl_;
  s.device = device_index;
  s.transfer_bytes = transfer_bytes;
  MOELAB_CUDA_CHECK(cudaSetDevice(device_index));
  MOELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
  const size_t bytes = static_cast<size_t>(transfer_bytes);
  MOELAB_CUDA_CHECK(cudaMalloc(&s.device_buffer, bytes));
  MOELAB_CUDA_CHECK(cudaMallocHost(&s.pinned, bytes));
  s.pageable = std::malloc(bytes);
  if (s.pageable == nullptr)
    throw GpuError("GPU session: cannot allocate " + std::to_string(bytes) + " pageable bytes");
  // Touch every host page so the copies measure transfers, not first-touch page faults.
  std::fill_n(static_cast<unsigned char*>(s.pinned), bytes, static_cast<unsigned char>(1));
  std::fill_n(static_cast<unsigned char*>(s.pageable), bytes, static_cast<unsigned char>(1));
  MOELAB_CUDA_CHECK(cudaMemsetAsync(s.device_buffer, 0, bytes, s.stream));
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(s.stream));
}

GpuProfileSession::~GpuProfileSession() = default;

double GpuProfileSession::CopyHostToDevice(int64_t bytes, bool pinned) {
  return impl_->Copy(bytes, true, pinned);
}

double GpuProfileSession::CopyDeviceToHost(int64_t bytes, bool pinned) {
  return impl_->Copy(bytes, false, pinned);
}

std::vector<float> GpuExpertFfnForCheck(int device_index, int64_t tokens, int64_t hidden,
                                        int64_t intermediate, const std::vector<float>& x,
                                        const std::vector<uint16_t>& gate_up,
                                        const std::vector<uint16_t>& down) {
  if (tokens < 1 || hidden < 1 || intermediate < 1 ||
      static_cast<int64_t>(x.size()) != tokens * hidden ||
      static_cast<int64_t>(gate_up.size()) != 2 * intermediate * hidden ||
      static_cast<int64_t>(down.size()) != hidden * intermediate) {
    throw GpuError("GPU expert FFN check: sizes do not match tokens x hidden x intermediate");
  }
  MOELAB_CUDA_CHECK(cudaSetDevice(device_index));
  std::vector<Bf16> x_bf16(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_bf16[i] = __float2bfloat16(x[i]);
  DeviceBuffer block(static_cast<size_t>(3 * hidden * intermediate) * sizeof(Bf16));
  DeviceBuffer x_device(x_bf16.size() * sizeof(Bf16));
  DeviceBuffer gate_up_out(static_cast<size_t>(tokens * 2 * intermediate) * sizeof(Bf16));
  DeviceBuffer activation(static_cast<size_t>(tokens * intermediate) * sizeof(Bf16));
  DeviceBuffer out(static_cast<size_t>(tokens * hidden) * sizeof(Bf16));
  MOELAB_CUDA_CHECK(cudaMemcpy(block.data, gate_up.data(), gate_up.size() * sizeof(uint16_t),
                               cudaMemcpyHostToDevice));
  MOELAB_CUDA_CHECK(cudaMemcpy(block.as<Bf16>() + gate_up.size(), down.data(),
                               down.size() * sizeof(uint16_t), cudaMemcpyHostToDevice));
  MOELAB_CUDA_CHECK(cudaMemcpy(x_device.data, x_bf16.data(), x_bf16.size() * sizeof(Bf16),
                               cudaMemcpyHostToDevice));
  cublasHandle_t handle = nullptr;
  MOELAB_CUBLAS_CHECK(cublasCreate(&handle));
  try {
    ExpertFfnOnDevice(handle, nullptr, block.as<Bf16>(), hidden, intermediate, x_device.as<Bf16>(),
                      tokens, gate_up_out.as<Bf16>(), activation.as<Bf16>(), out.as<Bf16>());
    MOELAB_CUDA_CHECK(cudaDeviceSynchronize());
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  cublasDestroy(handle);
  std::vector<Bf16> out_bf16(static_cast<size_t>(tokens * hidden));
  MOELAB_CUDA_CHECK(cudaMemcpy(out_bf16.data(), out.data, out_bf16.size() * sizeof(Bf16),
                               cudaMemcpyDeviceToHost));
  std::vector<float> result(out_bf16.size());
  for (size_t i = 0; i < out_bf16.size(); ++i) result[i] = __bfloat162float(out_bf16[i]);
  return result;
}

}  // namespace moelab::device
