#pragma once

// The GPU backend's small kernels (gpu_kernels.cu), callable from C++ without CUDA types: device
// pointers, bf16 as its 16 raw bits, the stream as void* (a cudaStream_t). Every launch is checked
// (device/cuda_check.h). Activation rows are `ld` elements apart so every row (and every block of
// kGemmRows rows) starts 16-byte aligned for cuBLAS. Each kernel computes a token's values from
// that token's inputs alone, in an order that does not depend on how many rows the launch has:
// a token's result is the same in any batch (the CPU engine's invariant, kept on the GPU).
#include <cstdint>

namespace moelab::executor::gpu {

using Stream = void*;

// out[r][j] = float(embedding[tokens[r]][j]), j < hidden (embedding rows `ld_embedding` apart).
void EmbeddingLookup(const uint16_t* embedding, int64_t ld_embedding, int64_t hidden,
                     const int32_t* tokens, int64_t rows, float* out, int64_t ld_out,
                     Stream stream);

// out[r] = bf16(x[row(r)] / sqrt(mean(x[row(r)]^2) + eps) * weight), row(r) = source_rows[r] when
// given, else r.
void RmsNormToBf16(const float* x, int64_t ld_x, const int32_t* source_rows, int64_t rows,
                   int64_t width, const float* weight, float eps, uint16_t* out, int64_t ld_out,
                   Stream stream);

// Per-token places of one layer's keys and values: the sequence's cache base (layer 0) and
// capacity, and the token's position.
struct TokenCacheRefs {
  float* const* keys;       // [rows] device pointers
  float* const* values;     // [rows]
  const int64_t* capacity;  // [rows]
  const int32_t* position;  // [rows]
};

// The QKV projection's output [rows][ld_qkv] (q heads, k heads, v heads): adds the bias, applies
// the per-head q/k norms and the rotary embedding (rotate_half; tables [position][head_dim / 2]) in
// place, and writes k and v at each token's position in its cache, layer `layer`.
void FinishQkv(float* qkv, int64_t ld_qkv, int64_t rows, int64_t heads, int64_t kv_heads,
               int64_t head_dim, const float* bias, const float* q_norm, const float* k_norm,
               float eps, const float* rope_cos, const float* rope_sin, TokenCacheRefs caches,
               int64_t layer, Stream stream);

// Causal grouped-query attention of each token's q heads over its cache positions
// [max(0, position - window + 1), position] (window 0: all), flash-decoding style: the positions
// in splits of 32, each split's partial softmax and output in `scratch` (AttentionScratchFloats),
// the splits merged in order. out: bf16 [rows][ld_out], head h at h * head_dim.
int64_t AttentionScratchFloats(int64_t rows, int64_t heads, int64_t head_dim, int64_t max_visible);
void Attention(const float* qkv, int64_t ld_qkv, int64_t rows, int64_t heads, int64_t kv_heads,
               int64_t head_dim, int64_t sliding_window, float scale, TokenCacheRefs caches,
               int64_t layer, int64_t max_visible, float* scratch, uint16_t* out, int64_t ld_out,
               Stream stream);

// Row-wise softmax of x [rows][ld] over its first `width` columns, in place.
void SoftmaxRows(float* x, int64_t ld, int64_t rows, int64_t width, Stream stream);

// dst[i] = src[source_rows[i]] (bf16 rows of `width`); source_rows[i] < 0 leaves dst[i] alone.
void GatherRows(const uint16_t* src, int64_t ld_src, const int32_t* source_rows, int64_t rows,
                int64_t width, uint16_t* dst, int64_t ld_dst, Stream stream);

// out[r][j] = bf16(silu(gate_up[r][j]) * gate_up[r][width + j]).
void SwiGlu(const float* gate_up, int64_t ld_gate_up, int64_t rows, int64_t width, uint16_t* out,
            int64_t ld_out, Stream stream);

// out[t][j] = sum over s in [slot_begin[t], slot_begin[t + 1]) of slot_weight[s] *
// expert_out[slot_row[s]][j], in slot order (experts ascending, as the CPU adds them).
void CombineExperts(const float* expert_out, int64_t ld_expert_out, const int32_t* slot_begin,
                    const int32_t* slot_row, const float* slot_weight, int64_t rows, int64_t width,
                    float* out, int64_t ld_out, Stream stream);

// out[t][j] += g(t) * x[t][j]; g = sigmoid(gate_logit[t * ld_gate]) when gate_logit is given,
// else 1.
void AddScaledRows(const float* x, int64_t ld_x, const float* gate_logit, int64_t ld_gate,
                   int64_t rows, int64_t width, float* out, int64_t ld_out, Stream stream);

}  // namespace moelab::executor::gpu
