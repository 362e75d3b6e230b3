// The GPU model's forward pass (gpu_model.h): token data, attention, FFNs, the LM head, and the
// operator times from CUDA events.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "device/cuda_check.h"
#include "executor/gpu/gpu_model.h"

namespace moelab::executor::gpu {

void GpuTransformer::Gemm(const MatrixView& w, const uint16_t* x, int64_t ld_x, int64_t rows,
                          float* y, int64_t ld_y) {
  gpu::GemmRowBlocks(cublas_, w, x, ld_x, rows, y, ld_y);
}

// The device buffers Forward grows for a prefill of `tokens` into an empty cache (cudaMalloc and
// a memset each: synchronous, milliseconds, inside the first pass's time otherwise).
void GpuTransformer::ReservePass(int64_t tokens) {
  if (tokens < 1) throw base::Error("reserve a pass of " + std::to_string(tokens) + " tokens");
  const ExecutorConfig& c = config_;
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  const int64_t ld_d = Ld(c.hidden_size);
  hidden_.Grow(padded * ld_d);
  normed_.Grow(padded * ld_d);
  qkv_.Grow(padded * Ld(c.q_width() + 2 * c.kv_width()));
  attention_out_.Grow(padded * Ld(c.q_width()));
  projected_.Grow(padded * ld_d);
  ffn_out_.Grow(padded * ld_d);
  const int64_t visible = c.sliding_window > 0 ? std::min(tokens, c.sliding_window) : tokens;
  attention_partials_.Grow(gpu::AttentionScratchFloats(tokens, c.num_heads, c.head_dim, visible));
  int64_t ffn_width = std::max(c.dense_intermediate_size, c.shared_expert_intermediate_size);
  if (c.is_moe()) {
    router_probabilities_.Grow(padded * Ld(c.num_experts));
    // Each expert's rows start a whole block of kGpuGemmRows rows.
    const int64_t routed_rows = tokens * c.top_k;
    const int64_t gathered_rows =
        routed_rows + std::min(c.num_experts, routed_rows) * (kGpuGemmRows - 1);
    gathered_.Grow(gathered_rows * ld_d);
    expert_out_.Grow(gathered_rows * ld_d);
    ffn_width = std::max(ffn_width, c.expert_intermediate_size);
    if (c.expert_format != kernels::WeightFormat::kBf16) {
      const int64_t hidden_runs = gpu::QuantizedRuns(c.hidden_size);
      const int64_t width_runs = gpu::QuantizedRuns(c.expert_intermediate_size);
      token_quants_.Grow(tokens * hidden_runs * 32);
      token_quant_scales_.Grow(tokens * hidden_runs);
      activation_quants_.Grow(tokens * width_runs * 32);
      activation_quant_scales_.Grow(tokens * width_runs);
    }
  }
  if (c.num_shared_experts > 0) shared_out_.Grow(padded * ld_d);
  if (ffn_width > 0) {
    gate_up_.Grow(padded * Ld(2 * ffn_width));
    activation_.Grow(padded * Ld(ffn_width));
  }
  MOELAB_CUDA_CHECK(cudaDeviceSynchronize());
}

void GpuTransformer::Ffn(const FfnView& ffn, const uint16_t* x, int64_t rows, float* out,
                         int64_t ld_out) {
  const int64_t padded = RoundUp(rows, kGpuGemmRows);
  const int64_t ld_gate_up = Ld(2 * ffn.width);
  const int64_t ld_activation = Ld(ffn.width);
  gate_up_.Grow(padded * ld_gate_up);
  activation_.Grow(padded * ld_activation);
  Gemm(ffn.gate_up, x, Ld(config_.hidden_size), padded, gate_up_.get(), ld_gate_up);
  gpu::SwiGlu(gate_up_.get(), ld_gate_up, padded, ffn.width, activation_.get(), ld_activation,
              stream_);
  Gemm(ffn.down, activation_.get(), ld_activation, padded, out, ld_out);
}

void GpuTransformer::Mark(Segment segment) {
  if (events_used_ == events_.size()) {
    cudaEvent_t e = nullptr;
    MOELAB_CUDA_CHECK(cudaEventCreate(&e));
    events_.push_back(e);
    event_segments_.push_back(segment);
  }
  event_segments_[events_used_] = segment;
  MOELAB_CUDA_CHECK(cudaEventRecord(events_[events_used_], stream_));
  ++events_used_;
}

void GpuTransformer::CollectTimes() {
  // Called after the stream synchronized. Each span between two events belongs to the segment the
  // first one opened (host work between them, e.g. routing, counts where it happened).
  for (size_t i = 0; i + 1 < events_used_; ++i) {
    float ms = 0;
    MOELAB_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
    const double s = ms * 1e-3;
    switch (event_segments_[i]) {
      case kAttention:
        times_.attention_s += s;
        break;
      case kRouter:
        times_.router_s += s;
        break;
      case kExperts:
        times_.experts_s += s;
        break;
      case kLmHead:
        times_.lm_head_s += s;
        break;
      case kOther:
        times_.other_s += s;
        break;
    }
  }
  events_used_ = 0;
}

int64_t GpuTransformer::StageTokens(const std::vector<SequenceInput>& batch) {
  const ExecutorConfig& c = config_;
  std::vector<int32_t> ids, positions;
  std::vector<float*> key_bases, value_bases;
  std::vector<int64_t> capacities;
  int64_t max_visible = 1;
  for (const SequenceInput& s : batch) {
    auto* storage = dynamic_cast<GpuKvStorage*>(s.cache->device_storage());
    if (storage == nullptr)
      throw base::Error("forward pass: the GPU model needs KV caches from its NewCache");
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      const int64_t position = s.cache->length() + static_cast<int64_t>(i);
      ids.push_back(s.tokens[i]);
      positions.push_back(static_cast<int32_t>(position));
      key_bases.push_back(storage->keys());
      value_bases.push_back(storage->values());
      capacities.push_back(storage->capacity());
      const int64_t first =
          c.sliding_window > 0 ? std::max<int64_t>(0, position - c.sliding_window + 1) : 0;
      max_visible = std::max(max_visible, position - first + 1);
    }
  }
  events_used_ = 0;
  Mark(kOther);
  token_ids_.UploadAsync(ids, stream_);
  positions_.UploadAsync(positions, stream_);
  key_bases_.UploadAsync(key_bases, stream_);
  value_bases_.UploadAsync(value_bases, stream_);
  capacities_.UploadAsync(capacities, stream_);
  cache_refs_ = {key_bases_.get(), value_bases_.get(), capacities_.get(), positions_.get()};
  return max_visible;
}

void GpuTransformer::AttentionBlock(int64_t layer, int64_t tokens, int64_t max_visible) {
  const ExecutorConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  const int64_t q_width = c.q_width();
  const int64_t qkv_width = q_width + 2 * c.kv_width();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  const DeviceLayer& lw = layers_[layer];
  gpu::RmsNormToBf16(hidden_.get(), ld_d, nullptr, tokens, d, lw.attention_norm.get(),
                     c.rms_norm_eps, normed_.get(), ld_d, stream_);
  Mark(kAttention);
  Gemm(lw.qkv, normed_.get(), ld_d, padded, qkv_.get(), Ld(qkv_width));
  gpu::FinishQkv(qkv_.get(), Ld(qkv_width), tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                 lw.qkv_bias.get(), lw.q_norm.get(), lw.k_norm.get(), c.rms_norm_eps,
                 rope_cos_.get(), rope_sin_.get(), cache_refs_, layer, stream_);
  gpu::Attention(qkv_.get(), Ld(qkv_width), tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                 c.sliding_window, scale, cache_refs_, layer, max_visible,
                 attention_partials_.get(), attention_out_.get(), Ld(q_width), stream_);
  Gemm(lw.output, attention_out_.get(), Ld(q_width), padded, projected_.get(), ld_d);
}

void GpuTransformer::LmHead(const std::vector<SequenceInput>& batch, const ForwardOptions& options,
                            int64_t tokens, std::vector<float>& logits) {
  const ExecutorConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  Mark(kLmHead);
  std::vector<int32_t> rows;  // the kernels index rows with int32
  for (const int64_t r : LogitRowIndices(batch, options.logits, tokens))
    rows.push_back(static_cast<int32_t>(r));
  const int64_t logit_rows = static_cast<int64_t>(rows.size());
  const int64_t logit_padded = RoundUp(logit_rows, kGpuGemmRows);
  const int64_t ld_vocab = Ld(c.vocab_size);
  logit_rows_.UploadAsync(rows, stream_);
  normed_.Grow(logit_padded * ld_d);
  logits_.Grow(logit_padded * ld_vocab);
  gpu::RmsNormToBf16(hidden_.get(), ld_d, logit_rows_.get(), logit_rows, d, final_norm_.get(),
                     c.rms_norm_eps, normed_.get(), ld_d, stream_);
  Gemm(c.tied_embeddings ? embedding_ : lm_head_, normed_.get(), ld_d, logit_padded, logits_.get(),
       ld_vocab);
  logits.resize(static_cast<size_t>(logit_rows * c.vocab_size));
  MOELAB_CUDA_CHECK(
      cudaMemcpy2DAsync(logits.data(), static_cast<size_t>(c.vocab_size) * 4, logits_.get(),
                        static_cast<size_t>(ld_vocab) * 4, static_cast<size_t>(c.vocab_size) * 4,
                        static_cast<size_t>(logit_rows), cudaMemcpyDeviceToHost, stream_));
  Mark(kOther);
}

void GpuTransformer::Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
                             std::vector<float>& logits) {
  const ExecutorConfig& c = config_;
  const int64_t tokens = CheckForwardBatch(c, batch);
  if (options.experts)
    throw base::Error("--device gpu: experts come from the model's own offload runtime");
  MOELAB_CUDA_CHECK(cudaSetDevice(device_));
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  const int64_t padded = RoundUp(tokens, kGpuGemmRows);
  const int64_t max_visible = StageTokens(batch);

  const int64_t q_width = c.q_width();
  const int64_t qkv_width = q_width + 2 * c.kv_width();
  hidden_.Grow(padded * ld_d);
  normed_.Grow(padded * ld_d);
  qkv_.Grow(padded * Ld(qkv_width));
  attention_out_.Grow(padded * Ld(q_width));
  projected_.Grow(padded * ld_d);
  ffn_out_.Grow(padded * ld_d);
  attention_partials_.Grow(
      gpu::AttentionScratchFloats(tokens, c.num_heads, c.head_dim, max_visible));

  gpu::EmbeddingLookup(embedding_.data.get(), embedding_.ld, d, token_ids_.get(), tokens,
                       hidden_.get(), ld_d, stream_);

  routing::RoutingStep step = NewRoutingStep(options, batch, tokens);
  if (runtime_) runtime_->BeginPass(options.step_kind, tokens, static_cast<int64_t>(batch.size()));
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    const DeviceLayer& lw = layers_[layer];
    AttentionBlock(layer, tokens, max_visible);
    Mark(kOther);
    gpu::AddScaledRows(projected_.get(), ld_d, nullptr, 0, tokens, d, hidden_.get(), ld_d, stream_);
    gpu::RmsNormToBf16(hidden_.get(), ld_d, nullptr, tokens, d, lw.ffn_norm.get(), c.rms_norm_eps,
                       normed_.get(), ld_d, stream_);
    if (c.IsMoeLayer(layer)) {
      MoeBlock(layer, tokens, options, options.record ? &step : nullptr);
    } else {
      Mark(kExperts);
      Ffn(lw.dense, normed_.get(), tokens, ffn_out_.get(), ld_d);
    }
    Mark(kOther);
    gpu::AddScaledRows(ffn_out_.get(), ld_d, nullptr, 0, tokens, d, hidden_.get(), ld_d, stream_);
  }
  for (SequenceInput& s : batch) s.cache->Append(static_cast<int64_t>(s.tokens.size()));
  LmHead(batch, options, tokens, logits);
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  CollectTimes();
  if (options.record) options.record->steps.push_back(std::move(step));
  if (runtime_) runtime_->EndPass();
  ++passes_;
}

}  // namespace moelab::executor::gpu
