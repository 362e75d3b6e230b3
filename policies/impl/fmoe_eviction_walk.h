#pragma once

#include <cstddef>
#include <cstdint>

#include "policies/impl/fmoe_lowest_few.h"

// fMoE's eviction walk: the candidates' eviction values p * freq, with p the matched map's
// probability plus a floor, and the FmoeLowestFew::kSize lowest of them. It was a quarter of
// fMoE's simulated time at batch 1: a scalar walk over the cached experts' bits whose every
// comparison with the running bar is a branch the processor guesses wrong about as often as
// right. The AVX-512 walk keeps the lowest two per lane without branches and merges the lanes at
// the end, with the same answer as the scalar walk (the same doubles, compared the same way: the
// lowest (value, index) pairs, infinite values never kept). An AVX2 version of it (four lanes) was
// no faster than the scalar walk here (0.96-1.01x on fMoE's bench cases), so AVX2 CPUs keep that.
namespace moelab::policies::impl {

struct EvictionValues {
  const float* probabilities = nullptr;  // the matched map's [flat]; null: the floor alone
  double probability_floor = 0;
  const double* frequencies = nullptr;  // [flat]
};

// Offers `few` (cleared first) the lowest candidates: bit (flat % 64) of candidate_words[flat /
// 64] set. Values must be ordered (no NaN). Candidate bits name only flats that `values` holds:
// the AVX-512 walk reads 16 flats at a time with masked loads, so nothing past the arrays is
// touched.
void OfferLowestEvictable(const uint64_t* candidate_words, size_t words,
                          const EvictionValues& values, FmoeLowestFew& few);

// The variants, for the tests (each only where the CPU has its instructions).
void OfferLowestEvictableScalar(const uint64_t* candidate_words, size_t words,
                                const EvictionValues& values, FmoeLowestFew& few);
void OfferLowestEvictableAvx512(const uint64_t* candidate_words, size_t words,
                                const EvictionValues& values, FmoeLowestFew& few);
bool CpuHasAvx512();

}  // namespace moelab::policies::impl
