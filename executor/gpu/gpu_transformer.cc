// The GPU model's construction (gpu_transformer.h): the device's weights, the offload tier and
// runtime, the warm-up pass; and the factories. Compiled by the host compiler against the CUDA
// runtime and cuBLAS; the kernels are in gpu_kernels.cu, the pass in gpu_forward.cc.
#include "executor/gpu/gpu_transformer.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "device/cuda_check.h"
#include "device/gpu_devices.h"
#include "executor/gpu/gpu_model.h"
#include "executor/offload/offload_runtime.h"
#include "kernels/elementwise.h"

namespace moelab::executor {
namespace gpu {

GpuTransformer::GpuTransformer(const ModelWeights& weights, int device,
                               const offload::OffloadOptions* offload, kernels::ThreadPool* pool)
    : config_(weights.config), device_(device), offloaded_(offload != nullptr) {
  config_.Validate();
  MOELAB_CUDA_CHECK(cudaSetDevice(device_));
  CheckFits(weights, offload);
  MOELAB_CUDA_CHECK(cudaStreamCreate(&stream_));
  MOELAB_CUBLAS_CHECK(cublasCreate(&cublas_));
  MOELAB_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  UploadWeights(weights);
  if (offload) {
    if (!config_.is_moe())
      throw base::Error("--offload moves routed experts; model '" + config_.name + "' is dense");
    host_weights_ = &weights;
    pool_ = pool;
    auto tier = std::make_unique<gpu::GpuExpertTier>(weights, device_, stream_);
    tier_ = tier.get();
    // One device expert (expert 0 of the first MoE layer) for the warm-up pass and the latency
    // model; freed before the cache is allocated.
    warm_expert_.Grow(tier_->expert_bytes() / 2);
    MOELAB_CUDA_CHECK(cudaMemcpy(warm_expert_.get(), tier_->HostExpert(0, 0),
                                 static_cast<size_t>(tier_->expert_bytes()),
                                 cudaMemcpyHostToDevice));
    WarmUp();
    offload::OffloadOptions options = *offload;
    if (!options.fiddler_latency) options.fiddler_latency = MeasureFiddlerLatency(weights);
    warm_expert_ = DeviceArray<uint16_t>();
    runtime_ = std::make_unique<offload::OffloadRuntime>(config_, std::move(tier), options);
  } else {
    WarmUp();
  }
}

GpuTransformer::~GpuTransformer() {
  runtime_.reset();  // its tier's copies finish first
  if (host_rows_) cudaFreeHost(host_rows_);
  if (host_outputs_) cudaFreeHost(host_outputs_);
  if (host_rows_ready_) cudaEventDestroy(host_rows_ready_);
  for (cudaEvent_t e : events_) cudaEventDestroy(e);
  if (cublas_) cublasDestroy(cublas_);
  if (stream_) cudaStreamDestroy(stream_);
}

void GpuTransformer::WarmUp() {
  KvCache cache = NewCache(1);
  std::vector<SequenceInput> batch = {{&cache, {0}}};
  std::vector<float> logits;
  ForwardOptions options;
  options.step_kind = "warm-up";
  Forward(batch, options, logits);
  times_ = OperatorTimes{};
  passes_ = 0;
}

void GpuTransformer::CheckFits(const ModelWeights& weights,
                               const offload::OffloadOptions* offload) const {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  MOELAB_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Weights as bf16 (fp32 vectors are a rounding error of it) and room for activations; offloaded,
  // the routed experts are replaced by the expert memory.
  double needed = weights.TotalBytes() + 256.0 * 1024 * 1024;
  if (offload) {
    for (const LayerWeights& lw : weights.layers) {
      for (const FfnWeights& e : lw.experts) needed -= e.StoredBytes();
    }
    needed += static_cast<double>(offload->expert_memory_bytes);
  }
  if (needed > static_cast<double>(free_bytes)) {
    throw base::Error("model '" + config_.name + "' needs about " + std::to_string(needed / 1e9) +
                      " GB on GPU " + std::to_string(device_) + ", which has " +
                      std::to_string(static_cast<double>(free_bytes) / 1e9) + " GB free");
  }
}

void GpuTransformer::UploadWeights(const ModelWeights& w) {
  const ExecutorConfig& c = config_;
  embedding_ = UploadRowMajor(w.embedding.data(), c.vocab_size, c.hidden_size);
  if (!c.tied_embeddings) lm_head_ = Upload(w.lm_head);
  final_norm_ = UploadVector(w.final_norm);
  const kernels::RopeTable rope(c.head_dim, c.max_positions, c.rope_theta);
  rope_cos_ = UploadVector(rope.cos_table());
  rope_sin_ = UploadVector(rope.sin_table());
  layers_.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    DeviceLayer& d = layers_[l];
    d.attention_norm = UploadVector(lw.attention_norm);
    d.ffn_norm = UploadVector(lw.ffn_norm);
    d.qkv_bias = UploadVector(lw.qkv_bias);
    d.q_norm = UploadVector(lw.q_norm);
    d.k_norm = UploadVector(lw.k_norm);
    d.qkv = Upload(lw.qkv, "attention weights (--attention-bits)");
    d.output = Upload(lw.output, "attention weights (--attention-bits)");
    if (c.IsMoeLayer(l)) {
      d.router = Upload(lw.router);
      for (const FfnWeights& e : lw.experts) d.experts.push_back(UploadExpert(e));
      if (static_cast<int64_t>(d.experts.size()) != c.num_experts)
        throw base::Error(
            "--device gpu: the experts are not in RAM (offloaded runs stay on the CPU)");
      d.shared = Upload(lw.shared, "shared experts");
      if (!lw.shared_gate.empty()) d.shared_gate = Upload(lw.shared_gate);
    } else {
      d.dense = Upload(lw.dense, "dense FFN");
    }
  }
}

}  // namespace gpu

std::string GpuUnavailableReason(int device_index) {
  const device::GpuInventory inventory = device::DetectGpus();
  if (inventory.devices.empty()) return inventory.why_none;
  if (device_index < 0 || device_index >= static_cast<int>(inventory.devices.size())) {
    return "GPU " + std::to_string(device_index) + " does not exist (this machine has " +
           std::to_string(inventory.devices.size()) + ")";
  }
  return "";
}

std::unique_ptr<ForwardModel> MakeGpuTransformer(const ModelWeights& weights, int device_index) {
  const std::string why_not = GpuUnavailableReason(device_index);
  if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  return std::make_unique<gpu::GpuTransformer>(weights, device_index, nullptr, nullptr);
}

std::unique_ptr<ForwardModel> MakeOffloadedGpuTransformer(const ModelWeights& weights,
                                                          int device_index,
                                                          const offload::OffloadOptions& options,
                                                          kernels::ThreadPool& pool,
                                                          offload::OffloadRuntime** runtime) {
  const std::string why_not = GpuUnavailableReason(device_index);
  if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  auto model = std::make_unique<gpu::GpuTransformer>(weights, device_index, &options, &pool);
  if (runtime) *runtime = model->runtime();
  return model;
}

}  // namespace moelab::executor
