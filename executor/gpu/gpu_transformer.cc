// The executor's forward pass on a CUDA GPU (gpu_transformer.h). Compiled by the host compiler
// against the CUDA runtime and cuBLAS; the kernels are in gpu_kernels.cu.
#include "executor/gpu/gpu_transformer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "device/cuda_check.h"
#include "device/gpu_devices.h"
#include "executor/gpu/gpu_expert_tier.h"
#include "executor/gpu/gpu_kernels.h"
#include "executor/gpu/gpu_memory.h"
#include "executor/offload/offload_runtime.h"
#include "kernels/elementwise.h"
#include "kernels/expert_ffn.h"

namespace moelab::executor {
namespace {

using gpu::DeviceArray;
using gpu::Ld;
using gpu::MatrixView;
using gpu::RoundUp;

// A device array filled from the host asynchronously through its own pinned staging buffer (one
// per array: a staging buffer is rewritten only after the stream passed its previous copy, which
// the per-layer routing synchronization and the end of each pass guarantee).
template <typename T>
class StagedArray {
 public:
  StagedArray() = default;
  ~StagedArray() {
    if (staging_) cudaFreeHost(staging_);
  }
  StagedArray(const StagedArray&) = delete;
  StagedArray& operator=(const StagedArray&) = delete;

  void UploadAsync(const std::vector<T>& host, cudaStream_t stream) {
    const int64_t count = static_cast<int64_t>(host.size());
    if (count == 0) return;
    device_.Grow(count);
    if (count > staging_count_) {
      if (staging_) MOELAB_CUDA_CHECK(cudaFreeHost(staging_));
      staging_ = nullptr;
      staging_count_ = 0;
      MOELAB_CUDA_CHECK(cudaMallocHost(&staging_, static_cast<size_t>(count) * sizeof(T)));
      staging_count_ = count;
    }
    std::memcpy(staging_, host.data(), static_cast<size_t>(count) * sizeof(T));
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(device_.get(), staging_,
                                      static_cast<size_t>(count) * sizeof(T),
                                      cudaMemcpyHostToDevice, stream));
  }
  T* get() const { return device_.get(); }

 private:
  DeviceArray<T> device_;
  T* staging_ = nullptr;
  int64_t staging_count_ = 0;
};

struct FfnView {
  int64_t width = 0;
  MatrixView gate_up;
  MatrixView down;
};

// A matmul weight the model owns (zero padding past `cols`).
struct DeviceMatrix {
  DeviceArray<uint16_t> data;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  MatrixView view() const { return {data.get(), rows, cols, ld}; }
};

DeviceMatrix UploadRowMajor(const kernels::Bf16* row_major, int64_t rows, int64_t cols) {
  DeviceMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.ld = Ld(cols);
  std::vector<uint16_t> padded(static_cast<size_t>(rows * m.ld), 0);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(padded.data() + r * m.ld, row_major + r * cols, static_cast<size_t>(cols) * 2);
  m.data.Upload(padded);
  return m;
}

DeviceMatrix Upload(const kernels::PackedBf16Matrix& packed) {
  std::vector<kernels::Bf16> row_major(static_cast<size_t>(packed.rows() * packed.cols()));
  if (!row_major.empty()) packed.UnpackRows(0, packed.rows(), row_major.data());
  return UploadRowMajor(row_major.data(), packed.rows(), packed.cols());
}

DeviceMatrix Upload(const kernels::WeightMatrix& matrix, const std::string& what) {
  if (matrix.format() != kernels::WeightFormat::kBf16) {
    throw base::Error("--device gpu runs bf16 weights; " + what + " are " +
                      kernels::ToString(matrix.format()) +
                      " (the GPU backend has no quantized kernels yet: use --expert-bits 16 "
                      "--attention-bits 16)");
  }
  return Upload(matrix.bf16());
}

struct DeviceFfn {
  int64_t width = 0;
  DeviceMatrix gate_up;
  DeviceMatrix down;
  FfnView view() const { return {width, gate_up.view(), down.view()}; }
};

// An expert in one of the offload tier's device buffers (GpuExpertTier's layout).
FfnView ExpertInBuffer(const uint16_t* buffer, int64_t hidden, int64_t width, int64_t down_offset) {
  return {width,
          {buffer, 2 * width, hidden, Ld(hidden)},
          {buffer + down_offset, hidden, width, Ld(width)}};
}

DeviceFfn Upload(const FfnWeights& ffn, const std::string& what) {
  DeviceFfn d;
  d.width = ffn.width;
  if (ffn.width == 0) return d;
  d.gate_up = Upload(ffn.gate_up, what);
  d.down = Upload(ffn.down, what);
  return d;
}

DeviceArray<float> UploadVector(const std::vector<float>& host) {
  DeviceArray<float> d;
  if (!host.empty()) d.Upload(host);
  return d;
}

struct DeviceLayer {
  DeviceArray<float> attention_norm, ffn_norm, qkv_bias, q_norm, k_norm;
  DeviceMatrix qkv, output, router, shared_gate;
  std::vector<DeviceFfn> experts;
  DeviceFfn shared, dense;
};

// One sequence's keys and values in device memory, [layer][capacity][kv_width] fp32.
class GpuKvStorage final : public DeviceKvStorage {
 public:
  GpuKvStorage(int device, int64_t layers, int64_t capacity, int64_t kv_width)
      : device_(device), layers_(layers), capacity_(capacity), kv_width_(kv_width) {
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    keys_.Grow(layers * capacity * kv_width);
    values_.Grow(layers * capacity * kv_width);
  }
  void CopyPrefixFrom(const DeviceKvStorage& other, int64_t positions) override {
    const auto* from = dynamic_cast<const GpuKvStorage*>(&other);
    if (from == nullptr || from->device_ != device_ || from->kv_width_ != kv_width_ ||
        from->layers_ != layers_ || positions > capacity_ || positions > from->capacity_) {
      throw base::Error("KV cache copy between GPU caches of different devices or shapes");
    }
    if (positions == 0) return;
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    Copy2D(keys_.get(), from->keys_.get(), from->capacity_, positions, cudaMemcpyDeviceToDevice);
    Copy2D(values_.get(), from->values_.get(), from->capacity_, positions,
           cudaMemcpyDeviceToDevice);
  }
  void Upload(const std::vector<float>& keys, const std::vector<float>& values,
              int64_t positions) override {
    if (static_cast<int64_t>(keys.size()) != layers_ * capacity_ * kv_width_ ||
        keys.size() != values.size() || positions > capacity_) {
      throw base::Error("internal error: KV upload of the wrong size");
    }
    if (positions == 0) return;
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    Copy2D(keys_.get(), keys.data(), capacity_, positions, cudaMemcpyHostToDevice);
    Copy2D(values_.get(), values.data(), capacity_, positions, cudaMemcpyHostToDevice);
  }
  float* keys() const { return keys_.get(); }
  float* values() const { return values_.get(); }
  int64_t capacity() const { return capacity_; }

 private:
  // The first `positions` of every layer: one 2-D copy, a layer per row.
  void Copy2D(float* to, const float* from, int64_t from_capacity, int64_t positions,
              cudaMemcpyKind kind) const {
    MOELAB_CUDA_CHECK(cudaMemcpy2D(to, static_cast<size_t>(capacity_ * kv_width_) * sizeof(float),
                                   from,
                                   static_cast<size_t>(from_capacity * kv_width_) * sizeof(float),
                                   static_cast<size_t>(positions * kv_width_) * sizeof(float),
                                   static_cast<size_t>(layers_), kind));
  }

  int device_;
  int64_t layers_, capacity_, kv_width_;
  DeviceArray<float> keys_, values_;
};

enum Segment { kAttention, kRouter, kExperts, kLmHead, kOther };

class GpuTransformer final : public ForwardModel {
 public:
  // `offload`: routed experts stay in host memory (GpuExpertTier) behind a device expert cache
  // driven by the offload runtime; `weights` (the CPU kernels' copy of the experts, for experts the
  // policy runs on the CPU) and `pool` must then outlive the model.
  GpuTransformer(const ModelWeights& weights, int device, const offload::OffloadOptions* offload,
                 kernels::ThreadPool* pool)
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
  ~GpuTransformer() override {
    runtime_.reset();  // its tier's copies finish first
    if (host_rows_) cudaFreeHost(host_rows_);
    if (host_outputs_) cudaFreeHost(host_outputs_);
    if (host_rows_ready_) cudaEventDestroy(host_rows_ready_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    if (cublas_) cublasDestroy(cublas_);
    if (stream_) cudaStreamDestroy(stream_);
  }

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
  void CheckFits(const ModelWeights& weights, const offload::OffloadOptions* offload) const;
  // Fiddler's Algorithm 1 inputs measured here: one expert's copy host -> device, its GEMMs on
  // the device at one token, and the CPU kernels at 1 and 16 tokens (median of 9 each, each call
  // on another expert).
  model::FiddlerLatencyModel MeasureFiddlerLatency(const ModelWeights& weights);
  // The routed experts of a MoE layer through the offload runtime (gathered rows in per-expert
  // blocks); experts the policy sends to the CPU run there while the device runs the rest.
  void OffloadedExperts(int64_t layer, int64_t tokens,
                        const std::vector<std::vector<std::pair<int32_t, float>>>& routed,
                        const std::vector<int64_t>& block_begin);
  FfnView WarmExpertView() const {
    return ExpertInBuffer(warm_expert_.get(), config_.hidden_size, config_.expert_intermediate_size,
                          tier_->DownOffset());
  }
  // One untimed pass of one token: module loading, cuBLAS's kernel choice (every GEMM has the
  // one row-block shape, so one pass meets them all) and the first allocations stay out of the
  // first timed pass (TTFT), as a serving engine warms up before its first request.
  void WarmUp() {
    KvCache cache = NewCache(1);
    std::vector<SequenceInput> batch = {{&cache, {0}}};
    std::vector<float> logits;
    ForwardOptions options;
    options.step_kind = "warm-up";
    Forward(batch, options, logits);
    times_ = OperatorTimes{};
    passes_ = 0;
  }
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
  void MoeBlock(int64_t layer, int64_t tokens, const ForwardOptions& options,
                routing::RoutingStep* record);
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
      expert_out_, shared_out_, shared_gate_, scores_, logits_;
  DeviceArray<uint16_t> normed_, attention_out_, gathered_, activation_;
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
      for (const FfnWeights& e : lw.experts)
        d.experts.push_back(Upload(e, "experts (--expert-bits)"));
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
  scores_.Grow(tokens * c.num_heads * visible);
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

  // Token data.
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

  const int64_t q_width = c.q_width();
  const int64_t qkv_width = q_width + 2 * c.kv_width();
  hidden_.Grow(padded * ld_d);
  normed_.Grow(padded * ld_d);
  qkv_.Grow(padded * Ld(qkv_width));
  attention_out_.Grow(padded * Ld(q_width));
  projected_.Grow(padded * ld_d);
  ffn_out_.Grow(padded * ld_d);
  scores_.Grow(tokens * c.num_heads * max_visible);

  gpu::EmbeddingLookup(embedding_.data.get(), embedding_.ld, d, token_ids_.get(), tokens,
                       hidden_.get(), ld_d, stream_);

  routing::RoutingStep step = NewRoutingStep(options, batch, tokens);
  if (runtime_) runtime_->BeginPass(options.step_kind, tokens, static_cast<int64_t>(batch.size()));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    DeviceLayer& lw = layers_[layer];
    gpu::RmsNormToBf16(hidden_.get(), ld_d, nullptr, tokens, d, lw.attention_norm.get(),
                       c.rms_norm_eps, normed_.get(), ld_d, stream_);
    Mark(kAttention);
    Gemm(lw.qkv, normed_.get(), ld_d, padded, qkv_.get(), Ld(qkv_width));
    gpu::FinishQkv(qkv_.get(), Ld(qkv_width), tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                   lw.qkv_bias.get(), lw.q_norm.get(), lw.k_norm.get(), c.rms_norm_eps,
                   rope_cos_.get(), rope_sin_.get(), cache_refs_, layer, stream_);
    gpu::Attention(qkv_.get(), Ld(qkv_width), tokens, c.num_heads, c.num_kv_heads, c.head_dim,
                   c.sliding_window, scale, cache_refs_, layer, max_visible, scores_.get(),
                   attention_out_.get(), Ld(q_width), stream_);
    Gemm(lw.output, attention_out_.get(), Ld(q_width), padded, projected_.get(), ld_d);
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
  MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
  CollectTimes();
  if (options.record) options.record->steps.push_back(std::move(step));
  if (runtime_) runtime_->EndPass();
  ++passes_;
}

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

void GpuTransformer::OffloadedExperts(
    int64_t layer, int64_t tokens,
    const std::vector<std::vector<std::pair<int32_t, float>>>& routed,
    const std::vector<int64_t>& block_begin) {
  const ExecutorConfig& c = config_;
  const int64_t d = c.hidden_size;
  const int64_t ld_d = Ld(d);
  const int64_t experts = c.num_experts;
  const int64_t ld_experts = Ld(experts);
  const int32_t moe_layer = static_cast<int32_t>(layer - c.first_dense_layers);
  const policies::PolicyNeeds needs = runtime_->Needs();
  std::vector<int64_t> counts(static_cast<size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) counts[e] = static_cast<int64_t>(routed[e].size());
  ExpertDemandOf(counts, demand_);
  gate_mean_.clear();
  if (needs.gate_probabilities) GateMeanOf(host_probabilities_.data(), tokens, experts, gate_mean_);
  // The speculative gate (Mixtral-offloading): the next layer's router on this layer's normalized
  // hidden state, softmax per token, summed over tokens -- as the CPU engine computes it.
  next_scores_.clear();
  if (needs.next_layer_scores && layer + 1 < c.num_layers) {
    Mark(kRouter);
    const int64_t padded = RoundUp(tokens, kGpuGemmRows);
    Gemm(layers_[layer + 1].router, normed_.get(), ld_d, padded, router_probabilities_.get(),
         ld_experts);
    gpu::SoftmaxRows(router_probabilities_.get(), ld_experts, tokens, experts, stream_);
    next_probabilities_.resize(static_cast<size_t>(tokens * experts));
    MOELAB_CUDA_CHECK(cudaMemcpy2DAsync(
        next_probabilities_.data(), static_cast<size_t>(experts) * 4, router_probabilities_.get(),
        static_cast<size_t>(ld_experts) * 4, static_cast<size_t>(experts) * 4,
        static_cast<size_t>(tokens), cudaMemcpyDeviceToHost, stream_));
    MOELAB_CUDA_CHECK(cudaStreamSynchronize(stream_));
    NextLayerScoresOf(next_probabilities_.data(), tokens, experts, next_scores_);
    Mark(kExperts);
  }
  policies::LayerDemand demand;
  demand.layer = moe_layer;
  demand.tokens = tokens;
  demand.experts = demand_;
  demand.gate_probabilities = gate_mean_;
  demand.next_layer_scores = next_scores_;
  runtime_->PlanLayer(demand, run_order_);

  // The CPU's experts' rows go to the host before the device's experts are queued, so the CPU
  // computes while the device does (Fiddler's overlap).
  std::vector<int32_t> on_host;
  int64_t host_rows = 0;
  for (int32_t e : run_order_) {
    if (!runtime_->RunsOnHost(e)) continue;
    on_host.push_back(e);
    host_rows = std::max(host_rows, block_begin[e] + static_cast<int64_t>(routed[e].size()));
  }
  if (!on_host.empty()) {
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
          host_rows_ + block_begin[e] * ld_d, gathered_.get() + block_begin[e] * ld_d,
          static_cast<size_t>(static_cast<int64_t>(routed[e].size()) * ld_d) * 2,
          cudaMemcpyDeviceToHost, stream_));
    }
    if (host_rows_ready_ == nullptr)
      MOELAB_CUDA_CHECK(cudaEventCreateWithFlags(&host_rows_ready_, cudaEventDisableTiming));
    MOELAB_CUDA_CHECK(cudaEventRecord(host_rows_ready_, stream_));
  }
  for (int32_t e : run_order_) {
    if (runtime_->RunsOnHost(e)) continue;
    const int32_t buffer = runtime_->AcquireBuffer(moe_layer, e);
    Ffn(ExpertInBuffer(tier_->DeviceBuffer(buffer), d, c.expert_intermediate_size,
                       tier_->DownOffset()),
        gathered_.get() + block_begin[e] * ld_d, static_cast<int64_t>(routed[e].size()),
        expert_out_.get() + block_begin[e] * ld_d, ld_d);
    runtime_->Release(moe_layer, e);
  }
  if (on_host.empty()) return;
  MOELAB_CUDA_CHECK(cudaEventSynchronize(host_rows_ready_));
  const LayerWeights& host_layer = host_weights_->layers[static_cast<size_t>(layer)];
  for (int32_t e : on_host) {
    const int64_t count = static_cast<int64_t>(routed[e].size());
    const int64_t first = block_begin[e];
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

}  // namespace

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
  return std::make_unique<GpuTransformer>(weights, device_index, nullptr, nullptr);
}

std::unique_ptr<ForwardModel> MakeOffloadedGpuTransformer(const ModelWeights& weights,
                                                          int device_index,
                                                          const offload::OffloadOptions& options,
                                                          kernels::ThreadPool& pool,
                                                          offload::OffloadRuntime** runtime) {
  const std::string why_not = GpuUnavailableReason(device_index);
  if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  auto model = std::make_unique<GpuTransformer>(weights, device_index, &options, &pool);
  if (runtime) *runtime = model->runtime();
  return model;
}

}  // namespace moelab::executor
