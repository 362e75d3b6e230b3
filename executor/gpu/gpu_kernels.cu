// The GPU backend's small kernels. Reductions use fixed trees over a fixed block size, so a row's
// result depends on that row's data and length only (gpu_kernels.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "device/cuda_check.h"
#include "executor/gpu/gpu_kernels.h"

namespace moelab::executor::gpu {
namespace {

using Bf16 = __nv_bfloat16;
constexpr int kWarp = 32;
constexpr int kBlock = 256;

cudaStream_t AsStream(Stream stream) { return static_cast<cudaStream_t>(stream); }

__device__ Bf16* AsBf16(uint16_t* p) { return reinterpret_cast<Bf16*>(p); }
__device__ const Bf16* AsBf16(const uint16_t* p) { return reinterpret_cast<const Bf16*>(p); }

template <typename T>
__device__ T WarpSum(T value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ float WarpMax(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Sum over a block of kBlock threads (fixed tree); every thread gets the total.
template <typename T>
__device__ T BlockSum(T value, T* shared) {
  value = WarpSum(value);
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) shared[warp] = value;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < kBlock / kWarp; ++w) total += shared[w];
  __syncthreads();
  return total;
}

__global__ void EmbeddingKernel(const uint16_t* embedding, int64_t ld_embedding, int64_t hidden,
                                const int32_t* tokens, float* out, int64_t ld_out) {
  const int64_t r = blockIdx.x;
  const Bf16* row = AsBf16(embedding) + static_cast<int64_t>(tokens[r]) * ld_embedding;
  for (int64_t j = threadIdx.x; j < hidden; j += blockDim.x)
    out[r * ld_out + j] = __bfloat162float(row[j]);
}

__global__ void RmsNormKernel(const float* x, int64_t ld_x, const int32_t* source_rows,
                              int64_t width, const float* weight, float eps, uint16_t* out,
                              int64_t ld_out) {
  __shared__ double partial[kBlock / kWarp];
  const int64_t r = blockIdx.x;
  const float* row = x + (source_rows ? source_rows[r] : r) * ld_x;
  double sum_squares = 0;
  for (int64_t j = threadIdx.x; j < width; j += kBlock)
    sum_squares += static_cast<double>(row[j]) * row[j];
  sum_squares = BlockSum(sum_squares, partial);
  const float scale = static_cast<float>(rsqrt(sum_squares / static_cast<double>(width) + eps));
  Bf16* result = AsBf16(out) + r * ld_out;
  for (int64_t j = threadIdx.x; j < width; j += kBlock)
    result[j] = __float2bfloat16(row[j] * scale * weight[j]);
}

// One warp per (token, head of q | k | v).
__global__ void FinishQkvKernel(float* qkv, int64_t ld_qkv, int64_t heads, int64_t kv_heads,
                                int64_t head_dim, const float* bias, const float* q_norm,
                                const float* k_norm, float eps, const float* rope_cos,
                                const float* rope_sin, TokenCacheRefs caches, int64_t layer) {
  const int64_t r = blockIdx.x;
  const int64_t unit = blockIdx.y;  // [0, heads): q; [heads, heads + kv): k; then v
  const int lane = threadIdx.x;
  float* v = qkv + r * ld_qkv + unit * head_dim;
  if (bias) {
    for (int64_t i = lane; i < head_dim; i += kWarp) v[i] += bias[unit * head_dim + i];
  }
  __syncwarp();
  const bool is_q = unit < heads;
  const bool is_k = !is_q && unit < heads + kv_heads;
  const float* norm = is_q ? q_norm : (is_k ? k_norm : nullptr);
  if (norm) {
    double sum_squares = 0;
    for (int64_t i = lane; i < head_dim; i += kWarp)
      sum_squares += static_cast<double>(v[i]) * v[i];
    sum_squares = WarpSum(sum_squares);
    const float scale =
        static_cast<float>(rsqrt(sum_squares / static_cast<double>(head_dim) + eps));
    __syncwarp();
    for (int64_t i = lane; i < head_dim; i += kWarp) v[i] = v[i] * scale * norm[i];
    __syncwarp();
  }
  const int64_t position = caches.position[r];
  if (is_q || is_k) {
    const int64_t half = head_dim / 2;
    const float* c = rope_cos + position * half;
    const float* s = rope_sin + position * half;
    for (int64_t i = lane; i < half; i += kWarp) {
      const float a = v[i];
      const float b = v[i + half];
      v[i] = a * c[i] - b * s[i];
      v[i + half] = b * c[i] + a * s[i];
    }
    __syncwarp();
  }
  if (is_q) return;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t kv_head = is_k ? unit - heads : unit - heads - kv_heads;
  float* cache = (is_k ? caches.keys[r] : caches.values[r]) +
                 (layer * caches.capacity[r] + position) * kv_width + kv_head * head_dim;
  for (int64_t i = lane; i < head_dim; i += kWarp) cache[i] = v[i];
}

// Flash-decoding attention in two kernels. AttentionSplitKernel: one block per (token, kv head,
// up to kAttentionGroupChunk of its q heads, split of kAttentionSplit positions): the q heads that
// share the kv head read each key and value once; a warp per position computes the heads' scores,
// a warp per head their maximum and exponentials, a thread per (head, element) the unnormalized
// output; the split's (max, sum, output) go to `partials`. CombineSplitsKernel: one block per
// (token, q head) merges its splits in split order. The number of splits is the token's own
// ceil(visible / kAttentionSplit), so a token's bits do not depend on the batch around it.
constexpr int kAttentionSplit = 32;  // positions per split: one per lane in the softmax
constexpr int kAttentionThreads = 128;
constexpr int kAttentionGroupChunk = 16;

struct AttentionSpan {
  int64_t first = 0;    // first visible position
  int64_t visible = 0;  // positions seen
};

__device__ AttentionSpan VisibleSpan(int64_t position, int64_t sliding_window) {
  const int64_t first =
      sliding_window > 0 ? max(static_cast<int64_t>(0), position - sliding_window + 1) : 0;
  return {first, position - first + 1};
}

__device__ float* SplitPartial(float* partials, int64_t r, int64_t head, int64_t heads,
                               int64_t max_splits, int64_t split, int64_t head_dim) {
  return partials + ((r * heads + head) * max_splits + split) * (head_dim + 2);
}

__global__ void AttentionSplitKernel(const float* qkv, int64_t ld_qkv, int64_t heads,
                                     int64_t kv_heads, int64_t head_dim, int64_t sliding_window,
                                     float scale, TokenCacheRefs caches, int64_t layer,
                                     int64_t max_splits, float* partials) {
  extern __shared__ float shared[];  // q [chunk][head_dim], then scores [chunk][kAttentionSplit]
  const int64_t r = blockIdx.x;
  const int64_t group = heads / kv_heads;
  const int64_t group_chunks = (group + kAttentionGroupChunk - 1) / kAttentionGroupChunk;
  const int64_t kv_head = blockIdx.y / group_chunks;
  const int64_t head_begin = kv_head * group + (blockIdx.y % group_chunks) * kAttentionGroupChunk;
  const int64_t chunk =
      min(static_cast<int64_t>(kAttentionGroupChunk), kv_head * group + group - head_begin);
  const int64_t split = blockIdx.z;
  const AttentionSpan span = VisibleSpan(caches.position[r], sliding_window);
  const int64_t begin = split * kAttentionSplit;
  if (begin >= span.visible) return;
  const int64_t count = min(static_cast<int64_t>(kAttentionSplit), span.visible - begin);
  float* q = shared;
  float* scores = shared + chunk * head_dim;
  for (int64_t i = threadIdx.x; i < chunk * head_dim; i += blockDim.x)
    q[i] = qkv[r * ld_qkv + head_begin * head_dim + i];
  __syncthreads();
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t layer_offset = layer * caches.capacity[r] * kv_width + kv_head * head_dim;
  const float* keys = caches.keys[r] + layer_offset + (span.first + begin) * kv_width;
  const float* values = caches.values[r] + layer_offset + (span.first + begin) * kv_width;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  constexpr int kWarps = kAttentionThreads / kWarp;
  for (int64_t p = warp; p < count; p += kWarps) {
    const float* k = keys + p * kv_width;
    for (int64_t h = 0; h < chunk; ++h) {
      float dot = 0;
      for (int64_t i = lane; i < head_dim; i += kWarp) dot += q[h * head_dim + i] * k[i];
      dot = WarpSum(dot);
      if (lane == 0) scores[h * kAttentionSplit + p] = dot * scale;
    }
  }
  __syncthreads();
  for (int64_t h = warp; h < chunk; h += kWarps) {
    const float score = lane < count ? scores[h * kAttentionSplit + lane] : -INFINITY;
    const float maximum = WarpMax(score);
    const float e = lane < count ? __expf(score - maximum) : 0.0f;
    const float sum = WarpSum(e);
    scores[h * kAttentionSplit + lane] = e;
    if (lane == 0) {
      float* partial =
          SplitPartial(partials, r, head_begin + h, heads, max_splits, split, head_dim);
      partial[0] = maximum;
      partial[1] = sum;
    }
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < chunk * head_dim; i += blockDim.x) {
    const int64_t h = i / head_dim;
    const int64_t d = i % head_dim;
    float accumulator = 0;
    for (int64_t p = 0; p < count; ++p)
      accumulator += scores[h * kAttentionSplit + p] * values[p * kv_width + d];
    SplitPartial(partials, r, head_begin + h, heads, max_splits, split, head_dim)[2 + d] =
        accumulator;
  }
}

__global__ void CombineSplitsKernel(int64_t heads, int64_t head_dim, int64_t sliding_window,
                                    const int32_t* positions, int64_t max_splits,
                                    const float* partials, uint16_t* out, int64_t ld_out) {
  const int64_t r = blockIdx.x;
  const int64_t head = blockIdx.y;
  const AttentionSpan span = VisibleSpan(positions[r], sliding_window);
  const int64_t splits = (span.visible + kAttentionSplit - 1) / kAttentionSplit;
  const float* first = partials + (r * heads + head) * max_splits * (head_dim + 2);
  float maximum = -INFINITY;
  for (int64_t s = 0; s < splits; ++s) maximum = fmaxf(maximum, first[s * (head_dim + 2)]);
  float sum = 0;
  for (int64_t s = 0; s < splits; ++s)
    sum += __expf(first[s * (head_dim + 2)] - maximum) * first[s * (head_dim + 2) + 1];
  Bf16* result = AsBf16(out) + r * ld_out + head * head_dim;
  for (int64_t d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float accumulator = 0;
    for (int64_t s = 0; s < splits; ++s)
      accumulator +=
          __expf(first[s * (head_dim + 2)] - maximum) * first[s * (head_dim + 2) + 2 + d];
    result[d] = __float2bfloat16(accumulator / sum);
  }
}

// One warp per row.
__global__ void SoftmaxKernel(float* x, int64_t ld, int64_t width) {
  float* row = x + blockIdx.x * ld;
  const int lane = threadIdx.x;
  float maximum = -INFINITY;
  for (int64_t j = lane; j < width; j += kWarp) maximum = fmaxf(maximum, row[j]);
  maximum = WarpMax(maximum);
  float sum = 0;
  for (int64_t j = lane; j < width; j += kWarp) sum += expf(row[j] - maximum);
  sum = WarpSum(sum);
  __syncwarp();
  for (int64_t j = lane; j < width; j += kWarp) row[j] = expf(row[j] - maximum) / sum;
}

__global__ void GatherKernel(const uint16_t* src, int64_t ld_src, const int32_t* source_rows,
                             int64_t width, uint16_t* dst, int64_t ld_dst) {
  const int64_t i = blockIdx.x;
  const int32_t from = source_rows[i];
  if (from < 0) return;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    dst[i * ld_dst + j] = src[from * ld_src + j];
}

__global__ void SwiGluKernel(const float* gate_up, int64_t ld_gate_up, int64_t width, uint16_t* out,
                             int64_t ld_out) {
  const int64_t r = blockIdx.x;
  const float* row = gate_up + r * ld_gate_up;
  Bf16* result = AsBf16(out) + r * ld_out;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const float gate = row[j];
    result[j] = __float2bfloat16(gate / (1.0f + expf(-gate)) * row[width + j]);
  }
}

__global__ void CombineKernel(const float* expert_out, int64_t ld_expert_out,
                              const int32_t* slot_begin, const int32_t* slot_row,
                              const float* slot_weight, int64_t width, float* out, int64_t ld_out) {
  const int64_t t = blockIdx.x;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    float sum = 0;
    for (int32_t s = slot_begin[t]; s < slot_begin[t + 1]; ++s)
      sum += slot_weight[s] * expert_out[static_cast<int64_t>(slot_row[s]) * ld_expert_out + j];
    out[t * ld_out + j] = sum;
  }
}

__global__ void AddScaledKernel(const float* x, int64_t ld_x, const float* gate_logit,
                                int64_t ld_gate, int64_t width, float* out, int64_t ld_out) {
  const int64_t t = blockIdx.x;
  const float g = gate_logit ? 1.0f / (1.0f + expf(-gate_logit[t * ld_gate])) : 1.0f;
  for (int64_t j = threadIdx.x; j < width; j += blockDim.x)
    out[t * ld_out + j] += g * x[t * ld_x + j];
}

}  // namespace

void EmbeddingLookup(const uint16_t* embedding, int64_t ld_embedding, int64_t hidden,
                     const int32_t* tokens, int64_t rows, float* out, int64_t ld_out,
                     Stream stream) {
  if (rows == 0) return;
  EmbeddingKernel<<<rows, kBlock, 0, AsStream(stream)>>>(embedding, ld_embedding, hidden, tokens,
                                                         out, ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void RmsNormToBf16(const float* x, int64_t ld_x, const int32_t* source_rows, int64_t rows,
                   int64_t width, const float* weight, float eps, uint16_t* out, int64_t ld_out,
                   Stream stream) {
  if (rows == 0) return;
  RmsNormKernel<<<rows, kBlock, 0, AsStream(stream)>>>(x, ld_x, source_rows, width, weight, eps,
                                                       out, ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void FinishQkv(float* qkv, int64_t ld_qkv, int64_t rows, int64_t heads, int64_t kv_heads,
               int64_t head_dim, const float* bias, const float* q_norm, const float* k_norm,
               float eps, const float* rope_cos, const float* rope_sin, TokenCacheRefs caches,
               int64_t layer, Stream stream) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads + 2 * kv_heads));
  FinishQkvKernel<<<grid, kWarp, 0, AsStream(stream)>>>(qkv, ld_qkv, heads, kv_heads, head_dim,
                                                        bias, q_norm, k_norm, eps, rope_cos,
                                                        rope_sin, caches, layer);
  MOELAB_CUDA_CHECK_LAUNCH();
}

int64_t AttentionSplits(int64_t visible) {
  return (std::max<int64_t>(visible, 1) + kAttentionSplit - 1) / kAttentionSplit;
}

int64_t AttentionScratchFloats(int64_t rows, int64_t heads, int64_t head_dim, int64_t max_visible) {
  return rows * heads * AttentionSplits(max_visible) * (head_dim + 2);
}

void Attention(const float* qkv, int64_t ld_qkv, int64_t rows, int64_t heads, int64_t kv_heads,
               int64_t head_dim, int64_t sliding_window, float scale, TokenCacheRefs caches,
               int64_t layer, int64_t max_visible, float* scratch, uint16_t* out, int64_t ld_out,
               Stream stream) {
  if (rows == 0) return;
  const int64_t max_splits = AttentionSplits(max_visible);
  const int64_t group = heads / kv_heads;
  const int64_t group_chunks = (group + kAttentionGroupChunk - 1) / kAttentionGroupChunk;
  const int64_t chunk = std::min<int64_t>(group, kAttentionGroupChunk);
  const size_t shared_bytes =
      static_cast<size_t>(chunk * (head_dim + kAttentionSplit)) * sizeof(float);
  const dim3 split_grid(static_cast<unsigned>(rows), static_cast<unsigned>(kv_heads * group_chunks),
                        static_cast<unsigned>(max_splits));
  AttentionSplitKernel<<<split_grid, kAttentionThreads, shared_bytes, AsStream(stream)>>>(
      qkv, ld_qkv, heads, kv_heads, head_dim, sliding_window, scale, caches, layer, max_splits,
      scratch);
  MOELAB_CUDA_CHECK_LAUNCH();
  const dim3 combine_grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads));
  CombineSplitsKernel<<<combine_grid, kAttentionThreads, 0, AsStream(stream)>>>(
      heads, head_dim, sliding_window, caches.position, max_splits, scratch, out, ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void SoftmaxRows(float* x, int64_t ld, int64_t rows, int64_t width, Stream stream) {
  if (rows == 0) return;
  SoftmaxKernel<<<rows, kWarp, 0, AsStream(stream)>>>(x, ld, width);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void GatherRows(const uint16_t* src, int64_t ld_src, const int32_t* source_rows, int64_t rows,
                int64_t width, uint16_t* dst, int64_t ld_dst, Stream stream) {
  if (rows == 0) return;
  GatherKernel<<<rows, kBlock, 0, AsStream(stream)>>>(src, ld_src, source_rows, width, dst, ld_dst);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void SwiGlu(const float* gate_up, int64_t ld_gate_up, int64_t rows, int64_t width, uint16_t* out,
            int64_t ld_out, Stream stream) {
  if (rows == 0) return;
  SwiGluKernel<<<rows, kBlock, 0, AsStream(stream)>>>(gate_up, ld_gate_up, width, out, ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void CombineExperts(const float* expert_out, int64_t ld_expert_out, const int32_t* slot_begin,
                    const int32_t* slot_row, const float* slot_weight, int64_t rows, int64_t width,
                    float* out, int64_t ld_out, Stream stream) {
  if (rows == 0) return;
  CombineKernel<<<rows, kBlock, 0, AsStream(stream)>>>(expert_out, ld_expert_out, slot_begin,
                                                       slot_row, slot_weight, width, out, ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void AddScaledRows(const float* x, int64_t ld_x, const float* gate_logit, int64_t ld_gate,
                   int64_t rows, int64_t width, float* out, int64_t ld_out, Stream stream) {
  if (rows == 0) return;
  AddScaledKernel<<<rows, kBlock, 0, AsStream(stream)>>>(x, ld_x, gate_logit, ld_gate, width, out,
                                                         ld_out);
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace moelab::executor::gpu
