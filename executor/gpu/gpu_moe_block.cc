// A MoE layer on the GPU (gpu_model.h): the router on the device, the routing on the host, each
// expert's rows gathered into blocks of kGpuGemmRows, the experts, the weighted combine, the
// shared experts.
#include <utility>
#include <vector>

#include "device/cuda_check.h"
#include "executor/gpu/gpu_model.h"

namespace moelab::executor::gpu {

void GpuTransformer::MoeBlock(int64_t layer, int64_t tokens, const ForwardOptions& options,
                              routing::RoutingStep* record) {
  const ExecutorConfig& c = config_;
  DeviceLayer& lw = layers_[layer];
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  const int64_t experts = c.num_experts;
  const int64_t ld_experts = Ld(experts);
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  const int64_t moe_layer = layer - c.first_dense_layers;

  // Router on the device; the probabilities come back so the experts' token lists (which set the
  // expert GEMMs' shapes) are built on the host, as ggml's mul_mat_id reads its ids.
  Mark(kRouter);
  router_probabilities_.Grow(padded * ld_experts);
  Gemm(lw.router, normed_.get(), ld_d, padded, router_probabilities_.get(), ld_experts);
  gpu::SoftmaxRows(router_probabilities_.get(), ld_experts, tokens, experts, stream_);
  host_probabilities_.resize(static_cast<size_t>(tokens * experts));
  MOELAB_CUDA_CHECK(cudaMemcpy2DAsync(
      host_probabilities_.data(), static_cast<size_t>(experts) * 4, router_probabilities_.get(),
      static_cast<size_t>(ld_experts) * 4, static_cast<size_t>(experts) * 4,
      static_cast<size_t>(tokens), cudaMemcpyDeviceToHost, stream_));
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  RouteLayer(c, host_probabilities_.data(), tokens, options, passes_, moe_layer, record,
             token_experts_, token_weights_);

  // Each expert's tokens in token order, in a block of rows starting at a multiple of
  // kGpuGemmRows; per token its slots in expert order (the CPU's order of addition).
  std::vector<std::vector<std::pair<int32_t, float>>> routed(static_cast<size_t>(experts));
  for (int64_t t = 0; t < tokens; ++t) {
    for (size_t j = 0; j < token_experts_[t].size(); ++j)
      routed[token_experts_[t][j]].push_back({static_cast<int32_t>(t), token_weights_[t][j]});
  }
  std::vector<int64_t> block_begin(static_cast<size_t>(experts), 0);
  int64_t gathered_rows = 0;
  for (int64_t e = 0; e < experts; ++e) {
    block_begin[e] = gathered_rows;
    gathered_rows += RoundUp(static_cast<int64_t>(routed[e].size()), kGpuGemmRows);
  }
  std::vector<int32_t> gather(static_cast<size_t>(gathered_rows), -1);
  std::vector<std::vector<std::pair<int32_t, float>>> token_slots(static_cast<size_t>(tokens));
  for (int64_t e = 0; e < experts; ++e) {
    for (size_t i = 0; i < routed[e].size(); ++i) {
      const int32_t row = static_cast<int32_t>(block_begin[e] + static_cast<int64_t>(i));
      gather[row] = routed[e][i].first;
      token_slots[routed[e][i].first].push_back({row, routed[e][i].second});
    }
  }
  // routing_indices_: [gather rows | slot_begin (tokens + 1) | slot rows].
  std::vector<int32_t> indices = gather;
  std::vector<float> weights;
  const size_t slot_begin_offset = indices.size();
  int32_t slot = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    indices.push_back(slot);
    slot += static_cast<int32_t>(token_slots[t].size());
  }
  indices.push_back(slot);
  const size_t slot_row_offset = indices.size();
  for (int64_t t = 0; t < tokens; ++t) {
    for (const auto& [row, weight] : token_slots[t]) {
      indices.push_back(row);
      weights.push_back(weight);
    }
  }
  routing_indices_.UploadAsync(indices, stream_);
  slot_weights_.UploadAsync(weights, stream_);

  // The gather of each expert's rows and the weighted combine are the routing's dispatch, timed
  // with the router (once per layer, whatever the number of experts), so the experts' time is
  // what each activated expert adds: a cost source prices N experts as N x expert_ffn, and with
  // the dispatch in the experts' time the profile's expert_ffn (K experts on every token) carried
  // it K times over and a pass of N > K experts was priced up to 27 % high on an H200.
  if (gathered_rows > 0) {
    gathered_.Grow(gathered_rows * ld_d);
    expert_out_.Grow(gathered_rows * ld_d);
    gpu::GatherRows(normed_.get(), ld_d, routing_indices_.get(), gathered_rows, d, gathered_.get(),
                    ld_d, stream_);
    Mark(kExperts);
    if (runtime_) {
      OffloadedExperts(layer, tokens, routed, block_begin);
    } else {
      for (int64_t e = 0; e < experts; ++e) {
        const int64_t count = static_cast<int64_t>(routed[e].size());
        if (count == 0) continue;
        Ffn(offloaded_ ? WarmExpertView() : lw.experts[e].view(),
            gathered_.get() + block_begin[e] * ld_d, count,
            expert_out_.get() + block_begin[e] * ld_d, ld_d);
      }
    }
  }
  Mark(kRouter);
  gpu::CombineExperts(expert_out_.get(), ld_d, routing_indices_.get() + slot_begin_offset,
                      routing_indices_.get() + slot_row_offset, slot_weights_.get(), tokens, d,
                      ffn_out_.get(), ld_d, stream_);
  if (lw.shared.width > 0) {
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
}

}  // namespace moelab::executor::gpu
