// Builds without CUDA: the GPU backend explains why it is missing.
#include "base/error.h"
#include "executor/gpu/gpu_op_check.h"
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

namespace moelab::executor::gpu_check {
namespace {

[[noreturn]] void Refuse() { throw base::Error("GPU op check: " + GpuUnavailableReason(0)); }

}  // namespace

std::vector<float> Matmul(const std::vector<float>&, int64_t, const kernels::PackedBf16Matrix&) {
  Refuse();
}
std::vector<float> RmsNormToBf16(const std::vector<float>&, int64_t, int64_t,
                                 const std::vector<float>&, float) {
  Refuse();
}
std::vector<float> Softmax(const std::vector<float>&, int64_t, int64_t) { Refuse(); }
std::vector<float> SwiGlu(const std::vector<float>&, int64_t, int64_t) { Refuse(); }
std::vector<float> Attention(const std::vector<float>&, const std::vector<float>&,
                             const std::vector<float>&, int64_t, int64_t, int64_t, int64_t,
                             int64_t) {
  Refuse();
}
std::vector<float> QuantizedMatmul(const std::vector<float>&, int64_t, const std::vector<int32_t>&,
                                   const kernels::QuantizedMatrix&) {
  Refuse();
}

}  // namespace moelab::executor::gpu_check
