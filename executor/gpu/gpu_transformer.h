#pragma once

#include <memory>
#include <string>

#include "executor/forward_model.h"
#include "executor/offload/offload_runtime.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"

// The executor on a CUDA GPU (CUDA-free header; gpu_transformer.cc in CUDA builds, gpu_none.cc
// otherwise). The model's weights are copied to the device once (bf16; routed experts bf16, q8_0 or
// q4_0); GEMMs run on cuBLAS
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
// backend has no kernels for (quantized attention) and a model larger than the device's
// free memory; CUDA failures throw device::GpuError naming the call, file and line. `weights` must
// outlive the model only until this returns (everything is copied).
std::unique_ptr<ForwardModel> MakeGpuTransformer(const ModelWeights& weights, int device_index);

// The same with the routed experts offloaded host -> GPU: every expert in pinned host memory, a
// device expert cache and staging buffers of options.expert_memory_bytes, copies on a copy stream
// of their own overlapping compute, every decision made by the offload runtime's policy objects
// (the simulator's). Where the policy runs an expert on the CPU (fiddler, static-split), the CPU
// kernels run it from `weights` on `pool` while the GPU runs the rest; fiddler's latency model
// (copy, GPU and CPU expert times) is measured at construction. `weights` and `pool` must outlive
// the model; `*runtime` (when given) receives the runtime, owned by the model, for its stats.
std::unique_ptr<ForwardModel> MakeOffloadedGpuTransformer(const ModelWeights& weights,
                                                          int device_index,
                                                          const offload::OffloadOptions& options,
                                                          kernels::ThreadPool& pool,
                                                          offload::OffloadRuntime** runtime);

}  // namespace moelab::executor
