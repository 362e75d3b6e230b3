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

__device__ float BlockMax(float value, float* shared) {
  value = WarpMax(value);
  const int warp = threadIdx.x / kWarp;
  if (threadIdx.x % kWarp == 0) shared[warp] = value;
  __syncthreads();
  float result = shared[0];
  for (int w = 1; w < kBlock / kWarp; ++w) result = fmaxf(result, shared[w]);
  __syncthreads();
  return result;
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

// One block of kBlock threads per (token, q head): scores by warps (one position per warp at a
// time), softmax over the block, then each thread sums its output elements over the positions.
__global__ void AttentionKernel(const float* qkv, int64_t ld_qkv, int64_t heads, int64_t kv_heads,
                                int64_t head_dim, int64_t sliding_window, float scale,
                                TokenCacheRefs caches, int64_t layer, int64_t max_visible,
                                float* scores_scratch, uint16_t* out, int64_t ld_out) {
  __shared__ float partial[kBlock / kWarp];
  const int64_t r = blockIdx.x;
  const int64_t head = blockIdx.y;
  const int64_t group = heads / kv_heads;
  const int64_t kv_head = head / group;
  const int64_t kv_width = kv_heads * head_dim;
  const int64_t position = caches.position[r];
  const int64_t first =
      sliding_window > 0 ? max(static_cast<int64_t>(0), position - sliding_window + 1) : 0;
  const int64_t visible = position - first + 1;
  const float* q = qkv + r * ld_qkv + head * head_dim;
  const float* keys = caches.keys[r] + layer * caches.capacity[r] * kv_width + kv_head * head_dim;
  const float* values =
      caches.values[r] + layer * caches.capacity[r] * kv_width + kv_head * head_dim;
  float* scores = scores_scratch + (r * heads + head) * max_visible;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  for (int64_t p = warp; p < visible; p += kBlock / kWarp) {
    const float* k = keys + (first + p) * kv_width;
    float dot = 0;
    for (int64_t i = lane; i < head_dim; i += kWarp) dot += q[i] * k[i];
    dot = WarpSum(dot);
    if (lane == 0) scores[p] = dot * scale;
  }
  __syncthreads();
  float local_max = -INFINITY;
  for (int64_t p = threadIdx.x; p < visible; p += kBlock) local_max = fmaxf(local_max, scores[p]);
  const float maximum = BlockMax(local_max, partial);
  float local_sum = 0;
  for (int64_t p = threadIdx.x; p < visible; p += kBlock) {
    const float e = __expf(scores[p] - maximum);
    scores[p] = e;
    local_sum += e;
  }
  const float sum = BlockSum(local_sum, partial);  // its barrier also publishes scores[]
  const float inverse = 1.0f / sum;
  Bf16* result = AsBf16(out) + r * ld_out + head * head_dim;
  for (int64_t i = threadIdx.x; i < head_dim; i += kBlock) {
    float accumulator = 0;
    for (int64_t p = 0; p < visible; ++p)
      accumulator += scores[p] * values[(first + p) * kv_width + i];
    result[i] = __float2bfloat16(accumulator * inverse);
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

void Attention(const float* qkv, int64_t ld_qkv, int64_t rows, int64_t heads, int64_t kv_heads,
               int64_t head_dim, int64_t sliding_window, float scale, TokenCacheRefs caches,
               int64_t layer, int64_t max_visible, float* scores, uint16_t* out, int64_t ld_out,
               Stream stream) {
  if (rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(heads));
  AttentionKernel<<<grid, kBlock, 0, AsStream(stream)>>>(qkv, ld_qkv, heads, kv_heads, head_dim,
                                                         sliding_window, scale, caches, layer,
                                                         max_visible, scores, out, ld_out);
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
