#pragma once

#include <memory>
#include <string>

#include "executor/forward_model.h"
#include "executor/weights.h"

// The executor on a CUDA GPU (CUDA-free header; gpu_transformer.cc in CUDA builds, gpu_none.cc
// otherwise). The model's bf16 weights are copied to the device once; GEMMs run on cuBLAS
// (cublasGemmEx, bf16 in, fp32 compute) and the rest on small kernels (gpu_kernels.h); every
// sequence's keys and values live in device memory (NewCache). A token's result does not depend on
// what else its pass carries: every GEMM runs on blocks of kGpuGemmRows rows of one fixed shape, so
// cuBLAS picks one kernel and one summation order whatever the batch, and the small kernels reduce
// per token. So greedy speculative decoding equals greedy decoding on the GPU, as on the CPU.

namespace moelab::executor {

inline constexpr int64_t kGpuGemmRows = 64;

// Empty when this build has the CUDA backend and device `device_index` exists; else one line
// saying why not (no CUDA in the build, no driver, no such device).
std::string GpuUnavailableReason(int device_index);

// The model on GPU `device_index`. Refuses (moelab::Error, naming the flag) weight formats the GPU
// backend has no kernels for (quantized experts or attention) and a model larger than the device's
// free memory; CUDA failures throw device::GpuError naming the call, file and line. `weights` must
// outlive the model only until this returns (everything is copied).
std::unique_ptr<ForwardModel> MakeGpuTransformer(const ModelWeights& weights, int device_index);

}  // namespace moelab::executor
