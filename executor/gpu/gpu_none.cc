// Builds without CUDA: the GPU backend explains why it is missing.
#include "base/error.h"
#include "executor/gpu/gpu_transformer.h"

namespace moelab::executor {

std::string GpuUnavailableReason(int /*device_index*/) {
  return "this build has no CUDA backend (nvcc was not found when it was configured; "
         "configure with -DMOELAB_CUDA=ON where the CUDA toolkit is installed)";
}

std::unique_ptr<ForwardModel> MakeGpuTransformer(const ModelWeights& /*weights*/,
                                                 int device_index) {
  throw base::Error("--device gpu: " + GpuUnavailableReason(device_index));
}

std::unique_ptr<ForwardModel> MakeOffloadedGpuTransformer(
    const ModelWeights& /*weights*/, int device_index, const offload::OffloadOptions& /*options*/,
    kernels::ThreadPool& /*pool*/, offload::OffloadRuntime** /*runtime*/) {
  throw base::Error("--device gpu: " + GpuUnavailableReason(device_index));
}

}  // namespace moelab::executor
