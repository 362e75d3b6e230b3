#pragma once

// AttendHeadGroup's arithmetic, written once and included by one translation unit per instruction
// set: attention.cc (the baseline), attention_avx2.cc and attention_avx512f.cc, compiled with their
// set's flags and -ffp-contract=off. Not a public header.
//
// Every loop is elementwise or a fixed-order reduction, so the wider sets vectorize it without
// reassociating anything, and with no multiply-add contracted into an FMA each set computes the
// same float operations in the same order: the same bits on every instruction set, and a query's
// result depends only on its own row and its cache (never on the batch or the thread).
//
// In an unnamed namespace: each including translation unit gets its own copy (see fast_exp.h).

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/fast_exp.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace moelab::kernels::internal {
namespace {

// q . key over head_dim in kLanes independent partial sums, added pairwise at the end: the sums
// vectorize (a single running sum is one FMA latency per element: the scalar loop held decode
// attention at a long context to about 4 GFLOP/s), and the order is fixed.
constexpr int64_t kDotLanes = 16;

inline float DotLanes(const float* q, const float* key, int64_t head_dim) {
  float lanes[kDotLanes] = {};
  int64_t i = 0;
  for (; i + kDotLanes <= head_dim; i += kDotLanes) {
    for (int64_t j = 0; j < kDotLanes; ++j) lanes[j] += q[i + j] * key[i + j];
  }
  const int64_t rest = head_dim - i;  // under kDotLanes (the bound says so to the compiler too)
  for (int64_t j = 0; j < rest && j < kDotLanes; ++j) lanes[j] += q[i + j] * key[i + j];
  for (int64_t width = kDotLanes / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return lanes[0];
}

// The same sums in registers where the set has 16 float lanes in one or two vectors and head_dim
// is whole blocks of 16 (the compiler spills DotLanes' array to add it pairwise): each lane's
// products added in order from 0, then lanes j and j + 8, j and j + 4, j and j + 2, j and j + 1.
inline float Dot(const float* q, const float* key, int64_t head_dim) {
#if defined(__AVX512F__)
  if (head_dim % kDotLanes == 0) {
    __m512 lanes = _mm512_setzero_ps();
    for (int64_t i = 0; i < head_dim; i += kDotLanes)
      lanes = _mm512_add_ps(lanes, _mm512_mul_ps(_mm512_loadu_ps(q + i), _mm512_loadu_ps(key + i)));
    // Pairwise: lanes j + 8, then j + 4 (128-bit blocks), j + 2, j + 1 (within a block).
    const __m512 eight = _mm512_add_ps(lanes, _mm512_shuffle_f32x4(lanes, lanes, 0xEE));
    const __m512 four = _mm512_add_ps(eight, _mm512_shuffle_f32x4(eight, eight, 0x55));
    const __m512 two = _mm512_add_ps(four, _mm512_permute_ps(four, 0xEE));
    return _mm512_cvtss_f32(_mm512_add_ps(two, _mm512_permute_ps(two, 0x55)));
  }
#elif defined(__AVX2__)
  if (head_dim % kDotLanes == 0) {
    __m256 low = _mm256_setzero_ps(), high = _mm256_setzero_ps();
    for (int64_t i = 0; i < head_dim; i += kDotLanes) {
      low = _mm256_add_ps(low, _mm256_mul_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(key + i)));
      high = _mm256_add_ps(high,
                           _mm256_mul_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(key + i + 8)));
    }
    const __m256 eight = _mm256_add_ps(low, high);
    const __m128 four = _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1));
    const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
    return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
  }
#endif
  return DotLanes(q, key, head_dim);
}

// scores[p] = exp(scores[p] - max) over [first, last] (FastExp: vectorized); returns 1 / their sum,
// summed in double over kSumLanes interleaved partial sums added pairwise (a fixed order).
constexpr int64_t kSumLanes = 8;

inline float ExpAndInverseSum(float* scores, int64_t first, int64_t last, float max_score) {
  for (int64_t p = first; p <= last; ++p) scores[p] = FastExp(scores[p] - max_score);
  double lanes[kSumLanes] = {};
  int64_t p = first;
  for (; p + kSumLanes <= last + 1; p += kSumLanes) {
    for (int64_t j = 0; j < kSumLanes; ++j) lanes[j] += static_cast<double>(scores[p + j]);
  }
  for (int64_t j = 0; p <= last; ++p, ++j) lanes[j] += static_cast<double>(scores[p]);
  for (int64_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (int64_t j = 0; j < width; ++j) lanes[j] += lanes[j + width];
  }
  return static_cast<float>(1.0 / lanes[0]);
}

// kHeadDim: the head dimension at compile time (0: `head_dim` at run time). A fixed dimension lets
// the compiler keep a head's query, the key row and the output accumulator in registers; the
// operations and their order are the same either way, so are the bits.
template <int64_t kHeadDim>
inline void AttendHeadGroupRows(const float* q, int64_t heads, const float* keys,
                                const float* values, int64_t kv_stride, int64_t head_dim_arg,
                                int64_t first_visible, int64_t last_visible, float scale,
                                float* scores, float* out) {
  const int64_t head_dim = kHeadDim > 0 ? kHeadDim : head_dim_arg;
  const int64_t positions = last_visible + 1;
  float max_scores[16];
  for (int64_t h0 = 0; h0 < heads; h0 += 16) {
    // Up to 16 heads per pass over the rows (a GQA group is 1-8 heads in practice).
    const int64_t group = std::min<int64_t>(16, heads - h0);
    for (int64_t h = 0; h < group; ++h) max_scores[h] = -INFINITY;
    for (int64_t p = first_visible; p <= last_visible; ++p) {
      const float* key = keys + p * kv_stride;
      for (int64_t h = 0; h < group; ++h) {
        const float score = Dot(q + (h0 + h) * head_dim, key, head_dim) * scale;
        scores[(h0 + h) * positions + p] = score;
        max_scores[h] = std::max(max_scores[h], score);
      }
    }
    for (int64_t h = 0; h < group; ++h) {
      float* head_scores = scores + (h0 + h) * positions;
      const float inverse =
          ExpAndInverseSum(head_scores, first_visible, last_visible, max_scores[h]);
      // out[i] = sum over p in order of (score_p * inverse) * value_p[i], from 0; a fixed
      // dimension's sums in a local array the compiler keeps in registers (`out` may alias the
      // values as far as it knows, so it would store and reload the sums every position).
      float local[kHeadDim > 0 ? kHeadDim : 1];
      float* o = kHeadDim > 0 ? local : out + (h0 + h) * head_dim;
      std::fill_n(o, head_dim, 0.0f);
      for (int64_t p = first_visible; p <= last_visible; ++p) {
        const float weight = head_scores[p] * inverse;
        const float* value = values + p * kv_stride;
        for (int64_t i = 0; i < head_dim; ++i) o[i] += weight * value[i];
      }
      if (kHeadDim > 0) std::copy_n(local, head_dim, out + (h0 + h) * head_dim);
    }
  }
}

inline void AttendHeadGroupImpl(const float* q, int64_t heads, const float* keys,
                                const float* values, int64_t kv_stride, int64_t head_dim,
                                int64_t first_visible, int64_t last_visible, float scale,
                                float* scores, float* out) {
  const auto rows = head_dim == 64    ? AttendHeadGroupRows<64>
                    : head_dim == 128 ? AttendHeadGroupRows<128>
                                      : AttendHeadGroupRows<0>;
  rows(q, heads, keys, values, kv_stride, head_dim, first_visible, last_visible, scale, scores,
       out);
}

}  // namespace

// The wider sets' copies (attention_avx2.cc, attention_avx512f.cc), same arguments as
// AttendHeadGroup.
void AttendHeadGroupAvx2(const float* q, int64_t heads, const float* keys, const float* values,
                         int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                         int64_t last_visible, float scale, float* scores, float* out);
void AttendHeadGroupAvx512F(const float* q, int64_t heads, const float* keys, const float* values,
                            int64_t kv_stride, int64_t head_dim, int64_t first_visible,
                            int64_t last_visible, float scale, float* scores, float* out);

}  // namespace moelab::kernels::internal
