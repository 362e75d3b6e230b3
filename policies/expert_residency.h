#pragma once

#include <cstdint>
#include <vector>

#include "policies/offload_policy.h"

namespace moelab::policies {

// Which experts are on the accelerator, as the policy's decisions left them: the bookkeeping an
// engine (the simulator, the executor's offload runtime) keeps to check plans. No time: a copy in
// flight counts as there (its weights will be used after it lands).
enum class ExpertLocation : uint8_t {
  kAbsent,   // only in host RAM (or on storage)
  kCache,    // an expert-cache slot
  kStaging,  // a staging buffer, until promoted or discarded
};

class ExpertResidency {
 public:
  ExpertResidency(int64_t moe_layers, int64_t experts_per_layer)
      : moe_layers_(moe_layers),
        experts_(experts_per_layer),
        entries_(static_cast<size_t>(moe_layers * experts_per_layer)) {}

  struct Entry {
    ExpertLocation location = ExpertLocation::kAbsent;
    bool unused_prefetch = false;  // brought by a prefetch and not used yet
  };

  bool Contains(ExpertRef ref) const {
    return ref.layer >= 0 && ref.layer < moe_layers_ && ref.expert >= 0 && ref.expert < experts_;
  }
  Entry& at(ExpertRef ref) { return entries_[Flat(ref)]; }
  const Entry& at(ExpertRef ref) const { return entries_[Flat(ref)]; }
  int64_t cached() const { return cached_; }
  int64_t& cached() { return cached_; }

 private:
  size_t Flat(ExpertRef ref) const {
    return static_cast<size_t>(ref.layer * experts_ + ref.expert);
  }

  int64_t moe_layers_, experts_;
  std::vector<Entry> entries_;
  int64_t cached_ = 0;  // experts in cache slots
};

}  // namespace moelab::policies
