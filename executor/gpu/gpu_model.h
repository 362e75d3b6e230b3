#pragma once

// (CUDA builds only) GpuTransformer, the GPU ForwardModel behind gpu_transformer.h's factories:
// its construction (weights upload, warm-up) in gpu_transformer.cc, the forward pass in
// gpu_forward.cc, a MoE layer's routing and experts in gpu_moe_block.cc, the offloaded experts and
// fiddler's latency model in gpu_offloaded_experts.cc.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/gpu/gpu_expert_tier.h"
#include "executor/gpu/gpu_kernels.h"
#include "executor/gpu/gpu_kv_storage.h"
#include "executor/gpu/gpu_memory.h"
#include "executor/gpu/gpu_weights.h"
#include "executor/gpu/gpu_transformer.h"
#include "kernels/expert_ffn.h"

namespace moelab::executor::gpu {

// A MoE layer's routed rows as the device computes them: each expert's tokens in token order in a
// block of rows starting at a multiple of kGpuGemmRows, and per token its slots in expert order
// (the CPU's order of addition), so the combine adds them as the CPU does.
struct ExpertBlocks {
  std::vector<std::vector<std::pair<int32_t, float>>> routed;  // [expert]: (token, weight)
  std::vector<int64_t> block_begin;                            // [expert]: its first row
  int64_t gathered_rows = 0;
  // [gather rows (token, -1 padding) | slot_begin (tokens + 1) | slot rows]; weights per slot.
  std::vector<int32_t> indices;
  std::vector<float> weights;
  size_t slot_begin_offset = 0;
  size_t slot_row_offset = 0;
};
ExpertBlocks LayOutExpertBlocks(const std::vector<std::vector<int32_t>>& token_experts,
                                const std::vector<std::vector<float>>& token_weights,
                                int64_t experts, int64_t tokens);

class GpuTransformer final : public ForwardModel {
 public:
  // `offload`: routed experts stay in host memory (GpuExpertTier) behind a device expert cache
  // driven by the offload runtime; `weights` (the CPU kernels' copy of the experts, for experts the
  // policy runs on the CPU) and `pool` must then outlive the model.
  GpuTransformer(const ModelWeights& weights, int device, const offload::OffloadOptions* offload,
                 kernels::ThreadPool* pool);
  ~GpuTransformer() override;

  const ExecutorConfig& config() const override { return config_; }
  OperatorTimes& times() override { return times_; }
  int64_t passes() const override { return passes_; }
  std::string device() const override { return "gpu"; }
  KvCache NewCache(int64_t capacity) const override {
    return KvCache(
        config_, capacity,
        std::make_unique<GpuKvStorage>(device_, config_.num_layers, capacity, config_.kv_width()));
  }

  void Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
               std::vector<float>& logits) override;
  void ReservePass(int64_t tokens) override;
  offload::OffloadRuntime* runtime() const { return runtime_.get(); }

 private:
  // What a span of the pass's timing events is counted as (OperatorTimes).
  enum Segment { kAttention, kRouter, kExperts, kLmHead, kOther };

  void CheckFits(const ModelWeights& weights, const offload::OffloadOptions* offload) const;
  // Fiddler's Algorithm 1 inputs measured here: one expert's copy host -> device, its GEMMs on
  // the device at one token, and the CPU kernels at 1 and 16 tokens (median of 9 each, each call
  // on another expert).
  model::FiddlerLatencyModel MeasureFiddlerLatency(const ModelWeights& weights);
  // The routed experts of a MoE layer through the offload runtime (gathered rows in per-expert
  // blocks); experts the policy sends to the CPU run there while the device runs the rest.
  void OffloadedExperts(int64_t layer, int64_t tokens, const ExpertBlocks& blocks);
  // The layer's demand (and the gate signals the policy asks for) to the runtime: run_order_.
  void PlanOffloadedLayer(int64_t layer, int64_t tokens, const ExpertBlocks& blocks);
  // The rows of the experts the plan runs on the CPU, copied to pinned host memory on the stream
  // (host_rows_ready_ marks them); returns those experts.
  std::vector<int32_t> StageHostRows(const ExpertBlocks& blocks);
  // Those experts on the CPU kernels once their rows landed, their outputs queued to the device.
  void RunHostExperts(int64_t layer, const std::vector<int32_t>& on_host,
                      const ExpertBlocks& blocks);
  FfnView WarmExpertView() const {
    return ExpertInBuffer(warm_expert_.get(), config_.hidden_size, config_.expert_intermediate_size,
                          tier_->DownOffset());
  }
  // One untimed pass of one token: module loading, cuBLAS's kernel choice (every GEMM has the
  // one row-block shape, so one pass meets them all) and the first allocations stay out of the
  // first timed pass (TTFT), as a serving engine warms up before its first request.
  void WarmUp();
  void UploadWeights(const ModelWeights& weights);
  void Gemm(const MatrixView& w, const uint16_t* x, int64_t ld_x, int64_t rows, float* y,
            int64_t ld_y);
  void Gemm(const DeviceMatrix& w, const uint16_t* x, int64_t ld_x, int64_t rows, float* y,
            int64_t ld_y) {
    Gemm(w.view(), x, ld_x, rows, y, ld_y);
  }
  void Ffn(const FfnView& ffn, const uint16_t* x, int64_t rows, float* out, int64_t ld_out);
  void Ffn(const DeviceFfn& ffn, const uint16_t* x, int64_t rows, float* out, int64_t ld_out) {
    Ffn(ffn.view(), x, rows, out, ld_out);
  }
  // The pass's token data to the device (ids, positions, cache places; cache_refs_); returns the
  // most positions a token attends to.
  int64_t StageTokens(const std::vector<SequenceInput>& batch);
  // A layer's attention: norm, QKV, rotary and cache write, attention, output (into projected_).
  void AttentionBlock(int64_t layer, int64_t tokens, int64_t max_visible);
  // The final norm and the LM head on the rows that get logits, copied back into `logits`.
  void LmHead(const std::vector<SequenceInput>& batch, const ForwardOptions& options,
              int64_t tokens, std::vector<float>& logits);
  void MoeBlock(int64_t layer, int64_t tokens, const ForwardOptions& options,
                routing::RoutingStep* record);
  // Layer `layer`'s router on normed_, softmax per token, back in `host` [tokens][experts].
  void RouterProbabilities(int64_t layer, int64_t tokens, std::vector<float>& host);
  // The router's probabilities on the device, back to the host, and the layer's routing
  // (token_experts_, token_weights_).
  void Route(int64_t layer, int64_t tokens, const ForwardOptions& options,
             routing::RoutingStep* record);
  void SharedExperts(const DeviceLayer& lw, int64_t tokens);
  // Quantized routed experts (--expert-bits 8 or 4): the layer's tokens normed and quantized once,
  // then each expert's two quantized matmuls on its tokens' rows (gpu_quantized_kernels.h).
  void QuantizedExperts(int64_t layer, int64_t tokens, const ExpertBlocks& blocks);
  void Mark(Segment segment);
  void CollectTimes();

  ExecutorConfig config_;
  int device_;
  bool offloaded_ = false;
  const ModelWeights* host_weights_ = nullptr;  // offloaded: the CPU kernels' experts
  kernels::ThreadPool* pool_ = nullptr;         // offloaded: runs the CPU's experts
  gpu::GpuExpertTier* tier_ = nullptr;          // owned by runtime_
  std::unique_ptr<offload::OffloadRuntime> runtime_;
  DeviceArray<uint16_t> warm_expert_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  OperatorTimes times_;
  int64_t passes_ = 0;

  // Weights.
  DeviceMatrix embedding_;  // [vocab][hidden]; also the LM head when tied
  DeviceMatrix lm_head_;    // untied only
  DeviceArray<float> final_norm_, rope_cos_, rope_sin_;
  std::vector<DeviceLayer> layers_;

  // Per-pass token data: ids, positions, cache pointers and capacities; the rows that get logits.
  StagedArray<int32_t> token_ids_, positions_, logit_rows_;
  StagedArray<float*> key_bases_, value_bases_;
  StagedArray<int64_t> capacities_;
  // Activations, rows padded to kGpuGemmRows.
  DeviceArray<float> hidden_, qkv_, projected_, router_probabilities_, ffn_out_, gate_up_,
      expert_out_, shared_out_, shared_gate_, attention_partials_, logits_;
  DeviceArray<uint16_t> normed_, attention_out_, gathered_, activation_;
  // Quantized experts: the tokens' normed rows and an expert's SwiGLU output, quantized per run of
  // 32, and their scales.
  DeviceArray<int8_t> token_quants_, activation_quants_;
  DeviceArray<float> token_quant_scales_, activation_quant_scales_;
  // Routing: gather rows, per-token slot ranges and rows, and slot weights.
  StagedArray<int32_t> routing_indices_;
  StagedArray<float> slot_weights_;

  // Host scratch.
  std::vector<float> host_probabilities_, next_probabilities_;
  std::vector<policies::ExpertDemand> demand_;
  std::vector<float> gate_mean_, next_scores_;
  std::vector<int32_t> run_order_;
  uint16_t* host_rows_ = nullptr;   // pinned: the CPU's experts' input rows
  float* host_outputs_ = nullptr;   // pinned: their outputs, rows ld(hidden) apart
  int64_t host_rows_capacity_ = 0;  // rows of both
  std::vector<float> cpu_in_, cpu_out_;
  kernels::ExpertFfnScratch cpu_scratch_;
  cudaEvent_t host_rows_ready_ = nullptr;
  std::vector<std::vector<int32_t>> token_experts_;
  std::vector<std::vector<float>> token_weights_;
  gpu::TokenCacheRefs cache_refs_{};

  // Operator timing: an event at each segment boundary, read after the pass.
  std::vector<cudaEvent_t> events_;
  std::vector<Segment> event_segments_;
  size_t events_used_ = 0;
};

}  // namespace moelab::executor::gpu
