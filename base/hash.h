#pragma once

#include <cstdint>

namespace moelab::base {

// SplitMix64's finalizer (Stafford's Mix13): a bijection on 64 bits whose output bits each depend
// on every input bit. The one counter-based hash behind every seeded choice (synthetic weights,
// routing draws, sampling streams), so a value depends on its (seed, index...) tuple only.
constexpr uint64_t kSplitMix64Golden = 0x9e3779b97f4a7c15ULL;

constexpr uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One SplitMix64 step from state `x`: Mix64(x + golden ratio).
constexpr uint64_t SplitMix64(uint64_t x) { return Mix64(x + kSplitMix64Golden); }

}  // namespace moelab::base
