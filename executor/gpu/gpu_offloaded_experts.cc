// The GPU model's offloaded experts (gpu_model.h): a MoE layer's experts through the offload
// runtime, the device running what is in its cache while the CPU runs what the policy sends it;
// and fiddler's latency model, measured at construction.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "device/cuda_check.h"
#include "executor/gpu/gpu_model.h"
#include "kernels/elementwise.h"
#include "kernels/expert_ffn.h"

namespace moelab::executor::gpu {

model::FiddlerLatencyModel GpuTransformer::MeasureFiddlerLatency(const ModelWeights& weights) {
  // Each timed call uses another expert than the one before, so the weights come from memory, as
  // for an expert the policy has to place, not from a cache the previous call warmed: on the
  // device 4 experts (more than an H100's 50 MB L2 at Mixtral's 22 MB+), on the CPU every expert
  // of the model in turn (a single expert stayed in the host's L3 and gave 0.09 ms where a run
  // measured 0.66 ms once, flipping Algorithm 1's choice; results/gpu-h100/README.md).
  constexpr int kRepeats = 9;
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  model::FiddlerLatencyModel latency;
  const int64_t expert_elements = tier_->expert_bytes() / 2;
  const int64_t copies = std::min<int64_t>(4, config_.num_experts);
  DeviceArray<uint16_t> experts_on_device(copies * expert_elements);
  latency.transfer_s = tier_->MeasureCopySeconds(experts_on_device.get(), kRepeats);
  for (int64_t i = 0; i < copies; ++i) {
    MOELAB_CUDA_CHECK(cudaMemcpy(experts_on_device.get() + i * expert_elements,
                                 tier_->HostExpert(0, static_cast<int32_t>(i)),
                                 static_cast<size_t>(tier_->expert_bytes()),
                                 cudaMemcpyHostToDevice));
  }
  // The device's GEMMs at one token on the warm-up pass's gathered rows (real activations).
  const int64_t ld_d = Ld(config_.hidden_size);
  gathered_.Grow(kGpuGemmRows * ld_d);
  expert_out_.Grow(kGpuGemmRows * ld_d);
  latency.gpu_s = gpu::MedianEventSeconds(stream_, kRepeats, [&](int i) {
    Ffn(ExpertInBuffer(experts_on_device.get() + (i % copies) * expert_elements,
                       config_.hidden_size, config_.expert_intermediate_size, tier_->DownOffset()),
        gathered_.get(), 1, expert_out_.get(), ld_d);
  });
  // The CPU kernels at 1 and 16 tokens: cpu_lat(s) = base + s * per_token.
  std::vector<const FfnWeights*> host_experts;
  for (int64_t l = config_.first_dense_layers; l < config_.num_layers; ++l) {
    for (const FfnWeights& e : weights.layers[static_cast<size_t>(l)].experts)
      host_experts.push_back(&e);
  }
  constexpr int64_t kTokens = 16;
  const int64_t d = config_.hidden_size;
  std::vector<float> x(static_cast<size_t>(kTokens * d));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * i));
  std::vector<float> out(x.size());
  size_t next_expert = 0;
  const auto cpu_seconds = [&](int64_t tokens) {
    std::vector<double> seconds;
    for (int i = 0; i < kRepeats + 1; ++i) {
      const FfnWeights& expert = *host_experts[next_expert++ % host_experts.size()];
      const auto begin = std::chrono::steady_clock::now();
      kernels::ExpertFfn(x.data(), tokens, expert.gate_up, expert.down, out.data(), *pool_,
                         cpu_scratch_);
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      if (i > 0) seconds.push_back(s);
    }
    return median(seconds);
  };
  const double one = cpu_seconds(1);
  const double many = cpu_seconds(kTokens);
  latency.cpu_per_token_s = std::max(0.0, (many - one) / static_cast<double>(kTokens - 1));
  latency.cpu_base_s = std::max(0.0, one - latency.cpu_per_token_s);
  latency.Validate();
  return latency;
}

void GpuTransformer::PlanOffloadedLayer(int64_t layer, int64_t tokens, const ExpertBlocks& blocks) {
  const ExecutorConfig& c = config_;
  const int64_t experts = c.num_experts;
  const policies::PolicyNeeds needs = runtime_->Needs();
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) counts[e] = static_cast<int64_t>(blocks.routed[e].size());
  ExpertDemandOf(counts, demand_);
  gate_mean_.clear();
  if (needs.gate_probabilities) GateMeanOf(host_probabilities_.data(), tokens, experts, gate_mean_);
  // The speculative gate (Mixtral-offloading): the next layer's router on this layer's normalized
  // hidden state, softmax per token, summed over tokens -- as the CPU engine computes it.
  next_scores_.clear();
  if (needs.next_layer_scores && layer + 1 < c.num_layers) {
    Mark(kRouter);
    RouterProbabilities(layer + 1, tokens, next_probabilities_);
    NextLayerScoresOf(next_probabilities_.data(), tokens, experts, next_scores_);
    Mark(kExperts);
  }
  policies::LayerDemand demand;
  demand.layer = static_cast<int32_t>(layer - c.first_dense_layers);
  demand.tokens = tokens;
  demand.experts = demand_;
  demand.gate_probabilities = gate_mean_;
  demand.next_layer_scores = next_scores_;
  runtime_->PlanLayer(demand, run_order_);
}

std::vector<int32_t> GpuTransformer::StageHostRows(const ExpertBlocks& blocks) {
  const int64_t ld_d = Ld(config_.hidden_size);
  std::vector<int32_t> on_host;
  int64_t host_rows = 0;
  for (int32_t e : run_order_) {
    if (!runtime_->RunsOnHost(e)) continue;
    on_host.push_back(e);
    host_rows =
        std::max(host_rows, blocks.block_begin[e] + static_cast<int64_t>(blocks.routed[e].size()));
  }
  if (on_host.empty()) return on_host;
  if (host_rows > host_rows_capacity_) {
    MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (host_rows_) MOELAB_CUDA_CHECK(cudaFreeHost(host_rows_));
    if (host_outputs_) MOELAB_CUDA_CHECK(cudaFreeHost(host_outputs_));
    host_rows_ = nullptr;
    host_outputs_ = nullptr;
    host_rows_capacity_ = 0;
    MOELAB_CUDA_CHECK(cudaMallocHost(&host_rows_, static_cast<size_t>(host_rows * ld_d) * 2));
    MOELAB_CUDA_CHECK(
        cudaMallocHost(&host_outputs_, static_cast<size_t>(host_rows * ld_d) * sizeof(float)));
    host_rows_capacity_ = host_rows;
  }
  for (int32_t e : on_host) {
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(
        host_rows_ + blocks.block_begin[e] * ld_d, gathered_.get() + blocks.block_begin[e] * ld_d,
        static_cast<size_t>(static_cast<int64_t>(blocks.routed[e].size()) * ld_d) * 2,
        cudaMemcpyDeviceToHost, stream_));
  }
  if (host_rows_ready_ == nullptr)
    MOELAB_CUDA_CHECK(cudaEventCreateWithFlags(&host_rows_ready_, cudaEventDisableTiming));
  MOELAB_CUDA_CHECK(cudaEventRecord(host_rows_ready_, stream_));
  return on_host;
}

void GpuTransformer::RunHostExperts(int64_t layer, const std::vector<int32_t>& on_host,
                                    const ExpertBlocks& blocks) {
  const int64_t d = config_.hidden_size;
  const int64_t ld_d = Ld(d);
  MOELAB_CUDA_CHECK(cudaEventSynchronize(host_rows_ready_));
  const LayerWeights& host_layer = host_weights_->layers[static_cast<size_t>(layer)];
  for (int32_t e : on_host) {
    const int64_t count = static_cast<int64_t>(blocks.routed[e].size());
    const int64_t first = blocks.block_begin[e];
    cpu_in_.resize(static_cast<size_t>(count * d));
    cpu_out_.resize(cpu_in_.size());
    for (int64_t r = 0; r < count; ++r) {
      for (int64_t j = 0; j < d; ++j)
        cpu_in_[r * d + j] = kernels::Bf16ToFloat(host_rows_[(first + r) * ld_d + j]);
    }
    const FfnWeights& w = host_layer.experts[static_cast<size_t>(e)];
    kernels::ExpertFfn(cpu_in_.data(), count, w.gate_up, w.down, cpu_out_.data(), *pool_,
                       cpu_scratch_);
    for (int64_t r = 0; r < count; ++r) {
      std::memcpy(host_outputs_ + (first + r) * ld_d, cpu_out_.data() + r * d,
                  static_cast<size_t>(d) * sizeof(float));
    }
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(
        expert_out_.get() + first * ld_d, host_outputs_ + first * ld_d,
        static_cast<size_t>(count * ld_d) * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
}

void GpuTransformer::OffloadedExperts(int64_t layer, int64_t tokens, const ExpertBlocks& blocks) {
  const ExecutorConfig& c = config_;
  const int64_t ld_d = Ld(c.hidden_size);
  const int32_t moe_layer = static_cast<int32_t>(layer - c.first_dense_layers);
  PlanOffloadedLayer(layer, tokens, blocks);
  // The CPU's experts' rows go to the host before the device's experts are queued, so the CPU
  // computes while the device does (Fiddler's overlap).
  const std::vector<int32_t> on_host = StageHostRows(blocks);
  for (int32_t e : run_order_) {
    if (runtime_->RunsOnHost(e)) continue;
    const int32_t buffer = runtime_->AcquireBuffer(moe_layer, e);
    Ffn(ExpertInBuffer(tier_->DeviceBuffer(buffer), c.hidden_size, c.expert_intermediate_size,
                       tier_->DownOffset()),
        gathered_.get() + blocks.block_begin[e] * ld_d,
        static_cast<int64_t>(blocks.routed[e].size()),
        expert_out_.get() + blocks.block_begin[e] * ld_d, ld_d);
    runtime_->Release(moe_layer, e);
  }
  if (!on_host.empty()) RunHostExperts(layer, on_host, blocks);
}

}  // namespace moelab::executor::gpu
