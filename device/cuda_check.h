#pragma once

// For CUDA-enabled sources only (it includes the toolkit's headers): every CUDA and cuBLAS call
// goes through MOELAB_CUDA_CHECK / MOELAB_CUBLAS_CHECK, which throw GpuError naming the call, the
// error string, the file and the line. Kernel launches are followed by MOELAB_CUDA_CHECK_LAUNCH.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "device/gpu_error.h"

namespace moelab::device {

[[noreturn]] inline void ThrowGpuError(const char* call, const std::string& what, const char* file,
                                       int line) {
  throw GpuError(std::string(call) + " failed: " + what + " (" + file + ":" + std::to_string(line) +
                 ")");
}

}  // namespace moelab::device

#define MOELAB_CUDA_CHECK(call)                                                            \
  do {                                                                                     \
    const cudaError_t moelab_status_ = (call);                                             \
    if (moelab_status_ != cudaSuccess) {                                                   \
      ::moelab::device::ThrowGpuError(#call, cudaGetErrorString(moelab_status_), __FILE__, \
                                      __LINE__);                                           \
    }                                                                                      \
  } while (0)

#define MOELAB_CUBLAS_CHECK(call)                                                             \
  do {                                                                                        \
    const cublasStatus_t moelab_status_ = (call);                                             \
    if (moelab_status_ != CUBLAS_STATUS_SUCCESS) {                                            \
      ::moelab::device::ThrowGpuError(#call, cublasGetStatusString(moelab_status_), __FILE__, \
                                      __LINE__);                                              \
    }                                                                                         \
  } while (0)

#define MOELAB_CUDA_CHECK_LAUNCH() MOELAB_CUDA_CHECK(cudaGetLastError())
