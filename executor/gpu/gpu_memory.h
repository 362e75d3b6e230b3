#pragma once

// The GPU backend's device memory and GEMM helpers, shared by its sources (CUDA builds only: this
// header includes the toolkit's).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "device/cuda_check.h"
#include "executor/gpu/gpu_transformer.h"

namespace moelab::executor::gpu {

inline int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Activation rows are this many elements apart: 16-byte aligned for bf16 and fp32 alike.
inline int64_t Ld(int64_t width) { return RoundUp(std::max<int64_t>(width, 1), 8); }

// A device allocation of `count` T, zero-filled; Grow keeps it at least `count` long (contents
// are not kept).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(int64_t count) { Grow(count); }
  ~DeviceArray() {
    if (data_) cudaFree(data_);
  }
  DeviceArray(DeviceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void Grow(int64_t count) {
    if (count <= count_) return;
    if (data_) MOELAB_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    count_ = 0;
    MOELAB_CUDA_CHECK(cudaMalloc(&data_, static_cast<size_t>(count) * sizeof(T)));
    MOELAB_CUDA_CHECK(cudaMemset(data_, 0, static_cast<size_t>(count) * sizeof(T)));
    count_ = count;
  }
  void Upload(const T* host, int64_t count) {
    Grow(count);
    MOELAB_CUDA_CHECK(
        cudaMemcpy(data_, host, static_cast<size_t>(count) * sizeof(T), cudaMemcpyHostToDevice));
  }
  void Upload(const std::vector<T>& host) {
    Upload(host.data(), static_cast<int64_t>(host.size()));
  }
  T* get() const { return data_; }
  int64_t size() const { return count_; }

 private:
  T* data_ = nullptr;
  int64_t count_ = 0;
};

// A device array filled from the host asynchronously through its own pinned staging buffer (one
// per array: a staging buffer is rewritten only after the stream passed its previous copy, which
// the per-layer routing synchronization and the end of each pass guarantee).
template <typename T>
class StagedArray {
 public:
  StagedArray() = default;
  ~StagedArray() {
    if (staging_) cudaFreeHost(staging_);
  }
  StagedArray(const StagedArray&) = delete;
  StagedArray& operator=(const StagedArray&) = delete;

  void UploadAsync(const std::vector<T>& host, cudaStream_t stream) {
    const int64_t count = static_cast<int64_t>(host.size());
    if (count == 0) return;
    device_.Grow(count);
    if (count > staging_count_) {
      if (staging_) MOELAB_CUDA_CHECK(cudaFreeHost(staging_));
      staging_ = nullptr;
      staging_count_ = 0;
      MOELAB_CUDA_CHECK(cudaMallocHost(&staging_, static_cast<size_t>(count) * sizeof(T)));
      staging_count_ = count;
    }
    std::memcpy(staging_, host.data(), static_cast<size_t>(count) * sizeof(T));
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(device_.get(), staging_,
                                      static_cast<size_t>(count) * sizeof(T),
                                      cudaMemcpyHostToDevice, stream));
  }
  T* get() const { return device_.get(); }

 private:
  DeviceArray<T> device_;
  T* staging_ = nullptr;
  int64_t staging_count_ = 0;
};

// A matmul weight [rows][cols] on the device, row-major bf16 with rows `ld` elements apart.
struct MatrixView {
  const uint16_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
};

// y [rows][w.rows] = x [rows][w.cols] . w^T (x bf16 rows ld_x apart, y fp32 rows ld_y apart; both
// with rows up to a multiple of kGpuGemmRows). Row-major y^T is column-major y (w.rows x rows) =
// op_T(w as w.cols x w.rows) . (x as w.cols x rows). Always kGpuGemmRows rows at a time: one
// shape, so one cuBLAS kernel and summation order for every token whatever the batch.
inline void GemmRowBlocks(cublasHandle_t cublas, const MatrixView& w, const uint16_t* x,
                          int64_t ld_x, int64_t rows, float* y, int64_t ld_y) {
  const float alpha = 1.0f;
  const float beta = 0.0f;
  for (int64_t r = 0; r < rows; r += kGpuGemmRows) {
    MOELAB_CUBLAS_CHECK(cublasGemmEx(
        cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(w.rows), static_cast<int>(kGpuGemmRows),
        static_cast<int>(w.cols), &alpha, w.data, CUDA_R_16BF, static_cast<int>(w.ld), x + r * ld_x,
        CUDA_R_16BF, static_cast<int>(ld_x), &beta, y + r * ld_y, CUDA_R_32F,
        static_cast<int>(ld_y), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
}

// Median seconds of `repeats` runs of `op` (which queues work on `stream`), each timed with a
// pair of events; one untimed run first warms the path up.
template <typename Op>
double MedianEventSeconds(cudaStream_t stream, int repeats, Op op) {
  struct Events {
    cudaEvent_t start = nullptr, stop = nullptr;
    ~Events() {
      if (start) cudaEventDestroy(start);
      if (stop) cudaEventDestroy(stop);
    }
  } events;
  MOELAB_CUDA_CHECK(cudaEventCreate(&events.start));
  MOELAB_CUDA_CHECK(cudaEventCreate(&events.stop));
  std::vector<double> seconds;
  for (int i = 0; i < repeats + 1; ++i) {
    MOELAB_CUDA_CHECK(cudaEventRecord(events.start, stream));
    op(i);
    MOELAB_CUDA_CHECK(cudaEventRecord(events.stop, stream));
    MOELAB_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0;
    MOELAB_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    if (i > 0) seconds.push_back(ms * 1e-3);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace moelab::executor::gpu
