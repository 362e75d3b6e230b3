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

// The one seeded generator: Vigna's SplitMix64 stream from `state` (the state advances by the
// golden ratio, each number is Mix64 of it), so the n-th number is Mix64(state + n x golden) and
// a stream seeded by a tuple hash depends on that tuple only. Routing sources draw every token's
// experts from one (routing/).
class SplitMix64Stream {
 public:
  explicit constexpr SplitMix64Stream(uint64_t state) : state_(state) {}

  constexpr uint64_t Next() {
    state_ += kSplitMix64Golden;
    return Mix64(state_);
  }

  // Exactly uniform in [0, n) for n >= 1: rejects the (2^64 mod n) lowest values, then x % n.
  constexpr uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t x = Next();
      if (x >= threshold) return x % n;
    }
  }

 private:
  uint64_t state_;
};

}  // namespace moelab::base
