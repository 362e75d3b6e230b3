#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device/gpu_error.h"

// GPU measurements for the profiler: host<->device copies and a cuBLAS bf16 expert FFN. CUDA-free
// header (like gpu_devices.h): built from cuda_profile_cuda.cu when MOELAB_WITH_CUDA, else from
// cuda_profile_none.cc, whose session constructor always throws. Every CUDA and cuBLAS call in the
// CUDA build goes through a check macro that throws GpuError naming the call, the error and the
// source line.

namespace moelab::device {

// cuBLAS version ("13.0.2"), empty without CUDA or when cuBLAS cannot be loaded.
std::string CublasVersion();

// One device, its buffers and a stream. Not thread-safe; one session per thread.
class GpuProfileSession {
 public:
  // Selects device `device_index` and allocates a device buffer and host buffers (pinned with
  // cudaMallocHost, pageable with the C allocator) of `transfer_bytes` each (>= 1). Throws
  // GpuError when CUDA, the device or the memory is missing.
  GpuProfileSession(int device_index, int64_t transfer_bytes);
  ~GpuProfileSession();
  GpuProfileSession(const GpuProfileSession&) = delete;
  GpuProfileSession& operator=(const GpuProfileSession&) = delete;

  // Seconds of one copy of `bytes` (1..transfer_bytes) between the session's host buffer (pinned
  // or pageable) and its device buffer: host wall time around cudaMemcpyAsync on the session's
  // stream and cudaStreamSynchronize, i.e. what a caller waiting for the copy sees.
  double CopyHostToDevice(int64_t bytes, bool pinned);
  double CopyDeviceToHost(int64_t bytes, bool pinned);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A cuBLAS expert FFN (cublasGemmEx gate_up, bf16 in and out, fp32 compute; SiLU(gate) * up;
// cublasGemmEx down) on given data, for comparison with the CPU kernel:
// x [tokens][hidden] fp32 (rounded to bf16), gate_up [2 intermediate][hidden] and down
// [hidden][intermediate] as raw bf16 bits; returns [tokens][hidden] fp32 (from the bf16 output).
std::vector<float> GpuExpertFfnForCheck(int device_index, int64_t tokens, int64_t hidden,
                                        int64_t intermediate, const std::vector<float>& x,
                                        const std::vector<uint16_t>& gate_up,
                                        const std::vector<uint16_t>& down);

}  // namespace moelab::device
