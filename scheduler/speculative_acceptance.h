#pragma once

#include <cstdint>

namespace moelab::scheduler {

// Speculative decoding at a fixed acceptance rate, as a seeded process both serving engines draw
// from, so `moelab serve --alpha` and `moelab sim serve --alpha` emit the same token counts on the
// same requests: the draft token proposed for output position p of request r is accepted with
// probability alpha by one coin that depends only on (seed, r, p), never on the batch, the
// iteration or the order of calls. A decode that verifies `drafted` drafts after `generated`
// output tokens accepts the leading run of successful coins at positions generated ..
// generated + drafted - 1 (the executor's alpha-coin rule: drafts are accepted in order until the
// first rejection) and emits accepted + 1 tokens.
struct SpeculativeAcceptance {
  double alpha = 0.8;  // [0, 1)
  uint64_t seed = 1;

  // Uniform [0, 1) draw of the coin at output position `position` of request `request`.
  double Coin(int64_t request, int64_t position) const;
  // Drafts accepted, 0 .. drafted.
  int64_t Accepted(int64_t request, int64_t generated, int64_t drafted) const;
  void Validate() const;  // alpha in [0, 1): the error names --alpha
};

}  // namespace moelab::scheduler
