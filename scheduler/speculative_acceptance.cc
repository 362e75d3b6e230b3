#include "scheduler/speculative_acceptance.h"

#include <string>

#include "base/error.h"
#include "base/hash.h"

namespace moelab::scheduler {

double SpeculativeAcceptance::Coin(int64_t request, int64_t position) const {
  const uint64_t key =
      base::SplitMix64(base::SplitMix64(seed ^ 0x73657276ull) ^ static_cast<uint64_t>(request)) ^
      static_cast<uint64_t>(position);
  // The top 53 bits as a double in [0, 1).
  return static_cast<double>(base::SplitMix64(key) >> 11) * 0x1.0p-53;
}

int64_t SpeculativeAcceptance::Accepted(int64_t request, int64_t generated, int64_t drafted) const {
  int64_t accepted = 0;
  while (accepted < drafted && Coin(request, generated + accepted) < alpha) ++accepted;
  return accepted;
}

void SpeculativeAcceptance::Validate() const {
  if (!(alpha >= 0 && alpha < 1))
    throw base::Error("--alpha " + std::to_string(alpha) +
                      ": expected an acceptance rate in [0, 1)");
}

}  // namespace moelab::scheduler
