#include "policies/impl/fmoe_eviction_walk.h"

#include <bit>
#include <immintrin.h>
#include <limits>

// GCC 12's AVX-512 conversion intrinsics pass _mm512_undefined_*() as their unused merge
// source (and the reductions an undefined vector), which -W(maybe-)uninitialized reports wherever
// they are inlined (bug 105593; kernels/ does the same).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace moelab::policies::impl {
namespace {

static_assert(FmoeLowestFew::kSize == 2, "the AVX-512 walk keeps the lowest two per lane");

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The address of element `index` of `array` for a masked load, which may lie past the array's
// end in a last, partial group (the mask reads nothing there): computed as an integer, since
// pointer arithmetic past the end (even unread) is undefined.
template <typename T>
const T* MaskedLoadAddress(const T* array, size_t index) {
  return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(array) + index * sizeof(T));
}

}  // namespace

void OfferLowestEvictableScalar(const uint64_t* candidate_words, size_t words,
                                const EvictionValues& values, FmoeLowestFew& few) {
  few.clear();
  double bar = few.Bar();  // a local: a register in the loop
  for (size_t word = 0; word < words; ++word) {
    const int64_t first = static_cast<int64_t>(word * 64);
    for (uint64_t bits = candidate_words[word]; bits != 0; bits &= bits - 1) {
      const int64_t flat = first + std::countr_zero(bits);
      const double probability =
          values.probabilities
              ? values.probabilities[static_cast<size_t>(flat)] + values.probability_floor
              : values.probability_floor;
      const double value = probability * values.frequencies[static_cast<size_t>(flat)];
      if (value < bar) {
        few.Offer(flat, value);
        bar = few.Bar();
      }
    }
  }
}

// Per lane, the lowest two (value, index) pairs seen so far. A lane sees its flats in increasing
// index, so a strict `<` keeps the earlier of equal values, as the scalar walk does.
struct LaneLowestAvx512 {
  __m512d lowest, second;
  __m512i lowest_at, second_at;
};

// Sixteen flats a step (one masked load of the probabilities) as two independent sets of eight
// lanes (two dependency chains), without a branch per step: which groups hold candidates is as
// good as random, and a guess per group cost more than the group.
__attribute__((target("avx512f"))) void OfferLowestEvictableAvx512(const uint64_t* candidate_words,
                                                                   size_t words,
                                                                   const EvictionValues& values,
                                                                   FmoeLowestFew& few) {
  few.clear();
  const __m512d infinity = _mm512_set1_pd(kInfinity);
  const __m512d floor = _mm512_set1_pd(values.probability_floor);
  const __m512i lane_offsets = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  LaneLowestAvx512 lanes[2];
  for (auto& lane : lanes)
    lane = {infinity, infinity, _mm512_set1_epi64(-1), _mm512_set1_epi64(-1)};
  const auto step = [&](LaneLowestAvx512 & lane, __mmask8 active, __m256 probabilities, size_t base)
      __attribute__((target("avx512f"), always_inline)) {
    const __m512d probability =
        values.probabilities ? _mm512_add_pd(_mm512_cvtps_pd(probabilities), floor) : floor;
    const __m512d frequency =
        _mm512_maskz_loadu_pd(active, MaskedLoadAddress(values.frequencies, base));
    const __m512d value =
        _mm512_mask_blend_pd(active, infinity, _mm512_mul_pd(probability, frequency));
    const __m512i at =
        _mm512_add_epi64(_mm512_set1_epi64(static_cast<int64_t>(base)), lane_offsets);
    const __mmask8 below_lowest = _mm512_cmp_pd_mask(value, lane.lowest, _CMP_LT_OQ);
    const __mmask8 below_second = _mm512_cmp_pd_mask(value, lane.second, _CMP_LT_OQ);
    lane.second = _mm512_mask_blend_pd(
        below_lowest, _mm512_mask_blend_pd(below_second, lane.second, value), lane.lowest);
    lane.second_at = _mm512_mask_blend_epi64(
        below_lowest, _mm512_mask_blend_epi64(below_second, lane.second_at, at), lane.lowest_at);
    lane.lowest = _mm512_mask_blend_pd(below_lowest, lane.lowest, value);
    lane.lowest_at = _mm512_mask_blend_epi64(below_lowest, lane.lowest_at, at);
  };
  for (size_t word = 0; word < words; ++word) {
    const uint64_t bits = candidate_words[word];
    if (bits == 0) continue;
    for (size_t sixteen = 0; sixteen < 4; ++sixteen) {
      const __mmask16 active = static_cast<__mmask16>(bits >> (16 * sixteen));
      const size_t base = word * 64 + 16 * sixteen;
      __m512 probabilities = _mm512_setzero_ps();
      if (values.probabilities)
        probabilities =
            _mm512_maskz_loadu_ps(active, MaskedLoadAddress(values.probabilities, base));
      step(lanes[0], static_cast<__mmask8>(active), _mm512_castps512_ps256(probabilities), base);
      step(lanes[1], static_cast<__mmask8>(active >> 8),
           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(probabilities), 1)), base + 8);
    }
  }
  __m512d value[4] = {lanes[0].lowest, lanes[0].second, lanes[1].lowest, lanes[1].second};
  const __m512i at[4] = {lanes[0].lowest_at, lanes[0].second_at, lanes[1].lowest_at,
                         lanes[1].second_at};
  // The lowest two of the lanes' pairs, in (value, index) order, without a branch per pair (the
  // scalar merge of the 32 pairs was half the walk's time): the lowest value, the lowest index
  // holding it, that pair removed, again.
  const __m512i no_index = _mm512_set1_epi64(INT64_MAX);
  for (int kept = 0; kept < FmoeLowestFew::kSize; ++kept) {
    const double lowest = _mm512_reduce_min_pd(
        _mm512_min_pd(_mm512_min_pd(value[0], value[1]), _mm512_min_pd(value[2], value[3])));
    if (!(lowest < kInfinity)) break;  // no candidate left, or infinite values (never kept)
    const __m512d target = _mm512_set1_pd(lowest);
    __m512i index = no_index;
    for (size_t v = 0; v < 4; ++v) {
      index = _mm512_min_epi64(
          index, _mm512_mask_blend_epi64(_mm512_cmp_pd_mask(value[v], target, _CMP_EQ_OQ), no_index,
                                         at[v]));
    }
    const int64_t lowest_at = _mm512_reduce_min_epi64(index);
    few.Offer(lowest_at, lowest);
    const __m512i taken_at = _mm512_set1_epi64(lowest_at);
    for (size_t v = 0; v < 4; ++v) {
      const __mmask8 taken = _mm512_cmp_pd_mask(value[v], target, _CMP_EQ_OQ) &
                             _mm512_cmpeq_epi64_mask(at[v], taken_at);
      value[v] = _mm512_mask_blend_pd(taken, value[v], infinity);
    }
  }
}

bool CpuHasAvx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

void OfferLowestEvictable(const uint64_t* candidate_words, size_t words,
                          const EvictionValues& values, FmoeLowestFew& few) {
  if (CpuHasAvx512()) {
    OfferLowestEvictableAvx512(candidate_words, words, values, few);
  } else {
    OfferLowestEvictableScalar(candidate_words, words, values, few);
  }
}

}  // namespace moelab::policies::impl
