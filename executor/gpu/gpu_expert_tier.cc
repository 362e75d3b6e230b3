#include "executor/gpu/gpu_expert_tier.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "device/cuda_check.h"
#include "executor/gpu/gpu_memory.h"

namespace moelab::executor::gpu {
namespace {

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }
cudaEvent_t AsEvent(void* event) { return static_cast<cudaEvent_t>(event); }

// Row-major [rows][cols] of `matrix` into `out` with rows `ld` apart.
void UnpackPadded(const kernels::WeightMatrix& matrix, int64_t ld, uint16_t* out) {
  if (matrix.format() != kernels::WeightFormat::kBf16) {
    throw base::Error("--device gpu runs bf16 weights; experts are " +
                      kernels::ToString(matrix.format()) + " (use --expert-bits 16)");
  }
  std::vector<kernels::Bf16> row(static_cast<size_t>(matrix.cols()));
  for (int64_t r = 0; r < matrix.rows(); ++r) {
    matrix.bf16().UnpackRows(r, 1, row.data());
    std::memcpy(out + r * ld, row.data(), row.size() * sizeof(uint16_t));
  }
}

}  // namespace

GpuExpertTier::GpuExpertTier(const ModelWeights& weights, int device, void* compute_stream)
    : device_(device), compute_stream_(compute_stream) {
  const ExecutorConfig& c = weights.config;
  const int64_t hidden = c.hidden_size;
  const int64_t width = c.expert_intermediate_size;
  experts_ = c.num_experts;
  down_offset_ = 2 * width * Ld(hidden);
  expert_elements_ = down_offset_ + hidden * Ld(width);
  const int64_t moe_layers = c.num_layers - c.first_dense_layers;
  MOELAB_CUDA_CHECK(cudaSetDevice(device_));
  cudaStream_t copy_stream = nullptr;
  // Non-blocking: the copies overlap the compute stream and the runtime's synchronous uploads.
  MOELAB_CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream, cudaStreamNonBlocking));
  copy_stream_ = copy_stream;
  const size_t bytes = static_cast<size_t>(moe_layers * experts_ * expert_elements_) * 2;
  MOELAB_CUDA_CHECK(cudaMallocHost(&host_, bytes));
  std::memset(host_, 0, bytes);
  for (int64_t l = 0; l < moe_layers; ++l) {
    const LayerWeights& lw = weights.layers[static_cast<size_t>(l + c.first_dense_layers)];
    if (static_cast<int64_t>(lw.experts.size()) != experts_)
      throw base::Error("--device gpu --offload: the experts must be in RAM (the slow tier)");
    for (int64_t e = 0; e < experts_; ++e) {
      uint16_t* expert = host_ + (l * experts_ + e) * expert_elements_;
      UnpackPadded(lw.experts[static_cast<size_t>(e)].gate_up, Ld(hidden), expert);
      UnpackPadded(lw.experts[static_cast<size_t>(e)].down, Ld(width), expert + down_offset_);
    }
  }
}

GpuExpertTier::~GpuExpertTier() {
  // Copies still queued write into the buffers: finish them before freeing anything.
  if (copy_stream_) cudaStreamSynchronize(AsStream(copy_stream_));
  for (uint16_t* b : buffers_) cudaFree(b);
  for (void* e : filled_) cudaEventDestroy(AsEvent(e));
  for (void* e : released_) cudaEventDestroy(AsEvent(e));
  for (const Pending& p : waits_) {
    cudaEventDestroy(AsEvent(p.start));
    cudaEventDestroy(AsEvent(p.end));
  }
  for (void* e : event_pool_) cudaEventDestroy(AsEvent(e));
  if (host_) cudaFreeHost(host_);
  if (copy_stream_) cudaStreamDestroy(AsStream(copy_stream_));
}

void* GpuExpertTier::NewEvent() {
  if (!event_pool_.empty()) {
    void* e = event_pool_.back();
    event_pool_.pop_back();
    return e;
  }
  cudaEvent_t event = nullptr;
  MOELAB_CUDA_CHECK(cudaEventCreate(&event));
  return event;
}

int32_t GpuExpertTier::AddBuffer() {
  MOELAB_CUDA_CHECK(cudaSetDevice(device_));
  uint16_t* buffer = nullptr;
  MOELAB_CUDA_CHECK(cudaMalloc(&buffer, static_cast<size_t>(expert_bytes())));
  buffers_.push_back(buffer);
  cudaEvent_t filled = nullptr;
  cudaEvent_t released = nullptr;
  MOELAB_CUDA_CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
  MOELAB_CUDA_CHECK(cudaEventCreateWithFlags(&released, cudaEventDisableTiming));
  filled_.push_back(filled);
  released_.push_back(released);
  buffer_copy_.push_back(-1);
  return static_cast<int32_t>(buffers_.size() - 1);
}

int64_t GpuExpertTier::Submit(const Copy& copy) {
  const size_t b = static_cast<size_t>(copy.buffer);
  // The computation that last read this buffer comes first (an unrecorded event is no wait).
  MOELAB_CUDA_CHECK(cudaStreamWaitEvent(AsStream(copy_stream_), AsEvent(released_[b]), 0));
  MOELAB_CUDA_CHECK(cudaMemcpyAsync(buffers_[b], HostExpert(copy.layer, copy.expert),
                                    static_cast<size_t>(expert_bytes()), cudaMemcpyHostToDevice,
                                    AsStream(copy_stream_)));
  MOELAB_CUDA_CHECK(cudaEventRecord(AsEvent(filled_[b]), AsStream(copy_stream_)));
  const int64_t id = static_cast<int64_t>(copy_buffer_.size());
  copy_buffer_.push_back(copy.buffer);
  buffer_copy_[b] = id;
  return id;
}

bool GpuExpertTier::Done(int64_t copy) {
  const size_t b = static_cast<size_t>(copy_buffer_[static_cast<size_t>(copy)]);
  if (buffer_copy_[b] != copy) return true;  // a later copy into the buffer followed it
  const cudaError_t status = cudaEventQuery(AsEvent(filled_[b]));
  if (status == cudaErrorNotReady) return false;
  MOELAB_CUDA_CHECK(status);
  return true;
}

void GpuExpertTier::Wait(int64_t copy) {
  const size_t b = static_cast<size_t>(copy_buffer_[static_cast<size_t>(copy)]);
  if (buffer_copy_[b] != copy)
    throw base::Error("GPU offload: waiting for a copy whose buffer was refilled (a runtime bug)");
  // The stall is the compute stream's time between these two events.
  Pending pending{NewEvent(), NewEvent()};
  MOELAB_CUDA_CHECK(cudaEventRecord(AsEvent(pending.start), AsStream(compute_stream_)));
  MOELAB_CUDA_CHECK(cudaStreamWaitEvent(AsStream(compute_stream_), AsEvent(filled_[b]), 0));
  MOELAB_CUDA_CHECK(cudaEventRecord(AsEvent(pending.end), AsStream(compute_stream_)));
  waits_.push_back(pending);
}

void GpuExpertTier::Finish(int64_t copy) {
  const size_t b = static_cast<size_t>(copy_buffer_[static_cast<size_t>(copy)]);
  if (buffer_copy_[b] == copy) MOELAB_CUDA_CHECK(cudaEventSynchronize(AsEvent(filled_[b])));
}

void GpuExpertTier::Released(int32_t buffer) {
  MOELAB_CUDA_CHECK(
      cudaEventRecord(AsEvent(released_[static_cast<size_t>(buffer)]), AsStream(compute_stream_)));
}

void GpuExpertTier::PassEnded() {
  for (const Pending& p : waits_) {
    MOELAB_CUDA_CHECK(cudaEventSynchronize(AsEvent(p.end)));
    float ms = 0;
    MOELAB_CUDA_CHECK(cudaEventElapsedTime(&ms, AsEvent(p.start), AsEvent(p.end)));
    stall_s_ += ms * 1e-3;
    event_pool_.push_back(p.start);
    event_pool_.push_back(p.end);
  }
  waits_.clear();
}

double GpuExpertTier::MeasureCopySeconds(uint16_t* device_buffer, int repeats) {
  return MedianEventSeconds(AsStream(copy_stream_), repeats, [&](int i) {
    MOELAB_CUDA_CHECK(cudaMemcpyAsync(
        device_buffer, HostExpert(0, static_cast<int32_t>(i % experts_)),
        static_cast<size_t>(expert_bytes()), cudaMemcpyHostToDevice, AsStream(copy_stream_)));
  });
}

}  // namespace moelab::executor::gpu
