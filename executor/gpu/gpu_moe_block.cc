// A MoE layer on the GPU (gpu_model.h): the router on the device, the routing on the host, each
// expert's rows gathered into blocks of kGpuGemmRows, the experts, the weighted combine, the
// shared experts.
#include <utility>
#include <vector>

#include "device/cuda_check.h"
#include "executor/gpu/gpu_model.h"

namespace moelab::executor::gpu {

ExpertBlocks LayOutExpertBlocks(const std::vector<std::vector<int32_t>>& token_experts,
                                const std::vector<std::vector<float>>& token_weights,
                                int64_t experts, int64_t tokens) {
  ExpertBlocks b;
  // Each expert's tokens in token order, in a block of rows starting at a multiple of
  // kGpuGemmRows; per token its slots in expert order (the CPU's order of addition).
  b.routed.resize(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < token_experts[t].size(); ++j)
      b.routed[token_experts[t][j]].push_back({static_cast<int32_t>(t), token_weights[t][j]});
  }
  b.block_begin.assign(static_cast<size_t>(experts), 0);
  for (int64_t e = 0; e < experts; ++e) {
    b.block_begin[e] = b.gathered_rows;
    b.gathered_rows += RoundUp(static_cast<int64_t>(b.routed[e].size()), kGpuGemmRows);
  }
  std::vector<int32_t> gather(static_cast<size_t>(b.gathered_rows), -1);
  std::vector<std::vector<std::pair<int32_t, float>>> token_slots(static_cast<size_t>(tokens));
  for (int64_t e = 0; e < experts; ++e) {
    for (size_t i = 0; i < b.routed[e].size(); ++i) {
      const int32_t row = static_cast<int32_t>(b.block_begin[e] + static_cast<int64_t>(i));
      gather[row] = b.routed[e][i].first;
      token_slots[b.routed[e][i].first].push_back({row, b.routed[e][i].second});
    }
  }
  b.indices = gather;
  b.slot_begin_offset = b.indices.size();
  int32_t slot = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    b.indices.push_back(slot);
    slot += static_cast<int32_t>(token_slots[t].size());
  }
  b.indices.push_back(slot);
  b.slot_row_offset = b.indices.size();
  for (int64_t t = 0; t < tokens; ++t) {
    for (const auto& [row, weight] : token_slots[t]) {
      b.indices.push_back(row);
      b.weights.push_back(weight);
    }
  }
  return b;
}

void GpuTransformer::RouterProbabilities(int64_t layer, int64_t tokens, std::vector<float>& host) {
  const int64_t experts = config_.num_experts;
  const int64_t ld_experts = Ld(experts);
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  router_probabilities_.Grow(padded * ld_experts);
  Gemm(layers_[layer].router, normed_.get(), Ld(config_.hidden_size), padded,
       router_probabilities_.get(), ld_experts);
  gpu::SoftmaxRows(router_probabilities_.get(), ld_experts, tokens, experts, stream_);
  host.resize(static_cast<size_t>(tokens * experts));
  MOELAB_CUDA_CHECK(
      cudaMemcpy2DAsync(host.data(), static_cast<size_t>(experts) * 4, router_probabilities_.get(),
                        static_cast<size_t>(ld_experts) * 4, static_cast<size_t>(experts) * 4,
                        static_cast<size_t>(tokens), cudaMemcpyDeviceToHost, stream_));
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuTransformer::Route(int64_t layer, int64_t tokens, const ForwardOptions& options,
                           routing::RoutingStep* record) {
  const ExecutorConfig& c = config_;
  // Router on the device; the probabilities come back so the experts' token lists (which set the
  // expert GEMMs' shapes) are built on the host, as ggml's mul_mat_id reads its ids.
  Mark(kRouter);
  RouterProbabilities(layer, tokens, host_probabilities_);
  RouteLayer(c, host_probabilities_.data(), tokens, options, passes_, layer - c.first_dense_layers,
             record, token_experts_, token_weights_);
}

void GpuTransformer::SharedExperts(const DeviceLayer& lw, int64_t tokens) {
  const int64_t d = config_.hidden_size;
  const int64_t ld_d = Ld(d);
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  Mark(kExperts);
  shared_out_.Grow(padded * ld_d);
  Ffn(lw.shared, normed_.get(), tokens, shared_out_.get(), ld_d);
  const float* gate = nullptr;
  if (lw.shared_gate.rows > 0) {
    shared_gate_.Grow(padded * Ld(1));
    Gemm(lw.shared_gate, normed_.get(), ld_d, padded, shared_gate_.get(), Ld(1));
    gate = shared_gate_.get();
  }
  gpu::AddScaledRows(shared_out_.get(), ld_d, gate, Ld(1), tokens, d, ffn_out_.get(), ld_d,
                     stream_);
}

void GpuTransformer::QuantizedExperts(int64_t layer, int64_t tokens, const ExpertBlocks& blocks) {
  const ExecutorConfig& c = config_;
  const DeviceLayer& lw = layers_[layer];
  const int64_t d = c.hidden_size;
  const int64_t width = c.expert_intermediate_size;
  const int64_t ld_d = Ld(d);
  // The dispatch (timed with the router): every token's FFN input normed in fp32 and quantized
  // once; each expert reads its tokens' rows through the gather indices.
  const int64_t hidden_runs = gpu::QuantizedRuns(d);
  const int64_t width_runs = gpu::QuantizedRuns(width);
  token_quants_.Grow(tokens * hidden_runs * 32);
  token_quant_scales_.Grow(tokens * hidden_runs);
  gpu::RmsNormQuantize(hidden_.get(), ld_d, tokens, d, lw.ffn_norm.get(), c.rms_norm_eps,
                       token_quants_.get(), token_quant_scales_.get(), stream_);
  Mark(kExperts);
  const int64_t ld_gate_up = Ld(2 * width);
  // Sized for the most rows an expert can have before any expert is queued (a Grow frees).
  gate_up_.Grow(tokens * ld_gate_up);
  activation_quants_.Grow(tokens * width_runs * 32);
  activation_quant_scales_.Grow(tokens * width_runs);
  for (int64_t e = 0; e < c.num_experts; ++e) {
    const int64_t count = static_cast<int64_t>(blocks.routed[e].size());
    if (count == 0) continue;
    const DeviceFfn& expert = lw.experts[e];
    gpu::QuantizedMatmul(expert.quantized_gate_up.view(), token_quants_.get(),
                         token_quant_scales_.get(), routing_indices_.get() + blocks.block_begin[e],
                         count, gate_up_.get(), ld_gate_up, stream_);
    gpu::SwiGluQuantize(gate_up_.get(), ld_gate_up, count, width, activation_quants_.get(),
                        activation_quant_scales_.get(), stream_);
    gpu::QuantizedMatmul(expert.quantized_down.view(), activation_quants_.get(),
                         activation_quant_scales_.get(), nullptr, count,
                         expert_out_.get() + blocks.block_begin[e] * ld_d, ld_d, stream_);
  }
}

void GpuTransformer::MoeBlock(int64_t layer, int64_t tokens, const ForwardOptions& options,
                              routing::RoutingStep* record) {
  const ExecutorConfig& c = config_;
  DeviceLayer& lw = layers_[layer];
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  Route(layer, tokens, options, record);
  const ExpertBlocks blocks =
      LayOutExpertBlocks(token_experts_, token_weights_, c.num_experts, tokens);
  routing_indices_.UploadAsync(blocks.indices, stream_);
  slot_weights_.UploadAsync(blocks.weights, stream_);

  // The gather of each expert's rows and the weighted combine are the routing's dispatch, timed
  // with the router (once per layer, whatever the number of experts), so the experts' time is
  // what each activated expert adds: a cost source prices N experts as N x expert_ffn, and with
  // the dispatch in the experts' time the profile's expert_ffn (K experts on every token) carried
  // it K times over and a pass of N > K experts was priced up to 27 % high on an H200.
  if (blocks.gathered_rows > 0) {
    expert_out_.Grow(blocks.gathered_rows * ld_d);
    if (c.expert_format != kernels::WeightFormat::kBf16) {
      QuantizedExperts(layer, tokens, blocks);
    } else {
      gathered_.Grow(blocks.gathered_rows * ld_d);
      gpu::GatherRows(normed_.get(), ld_d, routing_indices_.get(), blocks.gathered_rows, d,
                      gathered_.get(), ld_d, stream_);
      Mark(kExperts);
      if (runtime_) {
        OffloadedExperts(layer, tokens, blocks);
      } else {
        for (int64_t e = 0; e < c.num_experts; ++e) {
          const int64_t count = static_cast<int64_t>(blocks.routed[e].size());
          if (count == 0) continue;
          Ffn(offloaded_ ? WarmExpertView() : lw.experts[e].view(),
              gathered_.get() + blocks.block_begin[e] * ld_d, count,
              expert_out_.get() + blocks.block_begin[e] * ld_d, ld_d);
        }
      }
    }
  }
  Mark(kRouter);
  gpu::CombineExperts(expert_out_.get(), ld_d, routing_indices_.get() + blocks.slot_begin_offset,
                      routing_indices_.get() + blocks.slot_row_offset, slot_weights_.get(), tokens,
                      d, ffn_out_.get(), ld_d, stream_);
  if (lw.shared.width > 0) SharedExperts(lw, tokens);
}

}  // namespace moelab::executor::gpu
