#pragma once

#include <cstdint>

#include "base/hash.h"

// The seeds of the synthetic routing sources (uniform, popularity, correlated): one SplitMix64
// chain over (salt, seed, step, layer, token), so a token's draws depend on that tuple only, never
// on what was drawn for other tokens or on call order. Each token's numbers come from a
// base::SplitMix64Stream seeded with its TupleHash.
namespace moelab::routing::internal {

// The per-(salt, seed) start of TupleHash, computed once per source.
constexpr uint64_t SaltedSeed(uint64_t salt, uint64_t seed) {
  return base::SplitMix64(salt ^ base::SplitMix64(seed));
}

// TuplePrefix's step part, shared by every layer of a step.
constexpr uint64_t TupleStep(uint64_t salted, int64_t step) {
  return base::SplitMix64(salted ^ static_cast<uint64_t>(step));
}

// TupleHash's (step, layer) part: TupleHashFrom(salted, step, layer, token) =
// SplitMix64(TuplePrefix(salted, step, layer) ^ token).
constexpr uint64_t TuplePrefixFrom(uint64_t step_hash, int64_t layer) {
  return base::SplitMix64(step_hash ^ static_cast<uint64_t>(layer));
}
constexpr uint64_t TuplePrefix(uint64_t salted, int64_t step, int64_t layer) {
  return TuplePrefixFrom(TupleStep(salted, step), layer);
}

constexpr uint64_t TupleHashFrom(uint64_t salted, int64_t step, int64_t layer, int64_t token) {
  return base::SplitMix64(TuplePrefix(salted, step, layer) ^ static_cast<uint64_t>(token));
}

constexpr uint64_t TupleHash(uint64_t salt, uint64_t seed, int64_t step, int64_t layer,
                             int64_t token) {
  return TupleHashFrom(SaltedSeed(salt, seed), step, layer, token);
}

}  // namespace moelab::routing::internal
