#pragma once

#include <cstdint>

namespace moelab::kernels {

// Attention of one query head against a sequence's KV cache.
// q: head_dim values (already rotated); keys/values: fp32, position p of this head's KV group at
// keys + p * kv_stride (kv_stride = num_kv_heads * head_dim). The query sees positions
// [first_visible, last_visible]. scores: scratch of last_visible + 1 floats. out: head_dim.
void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int64_t head_dim, int64_t first_visible, int64_t last_visible, float scale,
                   float* scores, float* out);

// The `heads` query heads that share one KV head (grouped-query attention), q and out heads x
// head_dim contiguous, scores heads x (last_visible + 1) floats: every key and value row is read
// once for the group instead of once per head (a sequence's cached rows of a long context do not
// stay in cache between heads). Each head's output has exactly AttendOneHead's bits.
void AttendHeadGroup(const float* q, int64_t heads, const float* keys, const float* values,
                     int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                     int64_t last_visible, float scale, float* scores, float* out);

}  // namespace moelab::kernels
