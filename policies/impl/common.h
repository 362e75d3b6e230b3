#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "policies/offload_policy.h"
#include "report/format.h"

// Small helpers the policies in policies/impl/ share.
namespace moelab::policies::impl {

inline int64_t FlatIndex(const OffloadSetup& setup, int64_t layer, int64_t expert) {
  return layer * setup.num_experts + expert;
}

inline ExpertRef RefOf(const OffloadSetup& setup, int64_t flat) {
  return ExpertRef{static_cast<int32_t>(flat / setup.num_experts),
                   static_cast<int32_t>(flat % setup.num_experts)};
}

// Calibration count of an expert (1 for every expert when the setup has no table).
inline double Popularity(const OffloadSetup& setup, int64_t layer, int64_t expert) {
  return setup.popularity.empty() ? 1.0 : setup.popularity[layer][expert];
}

// The popularity table, or a flat one (ties then fall back to layer, expert order).
inline model::PopularityTable PopularityOrFlat(const OffloadSetup& setup) {
  if (!setup.popularity.empty()) return setup.popularity;
  return model::PopularityTable(static_cast<size_t>(setup.num_moe_layers),
                                std::vector<double>(static_cast<size_t>(setup.num_experts), 1.0));
}

// Appends a decision with no fetch target, eviction or promotion, and returns it for the caller
// to complete. Built in place: a decision built on the stack and then copied in is read back in
// 16-byte pieces over the smaller stores that wrote it (a store-forwarding stall per decision,
// 6 % of a resident simulation).
inline ExpertDecision& AddDecision(LayerPlan& plan, int32_t expert, ExpertAction action) {
  ExpertDecision& decision = plan.decisions.emplace_back();
  decision.expert = expert;
  decision.action = action;
  return decision;
}

// Least-recently-used order over a fixed universe of items (flat expert indices), O(1) per
// operation: an intrusive doubly linked list, most recent at the front.
class LruList {
 public:
  explicit LruList(int64_t universe)
      : prev_(static_cast<size_t>(universe + 1), -1),
        next_(static_cast<size_t>(universe + 1), -1),
        member_(static_cast<size_t>(universe), 0),
        sentinel_(universe) {
    prev_[sentinel_] = next_[sentinel_] = sentinel_;
  }

  bool Contains(int64_t item) const { return member_[item] != 0; }
  int64_t size() const { return size_; }

  // Inserts as most recent, or moves there when present.
  void Touch(int64_t item) {
    if (Contains(item))
      Unlink(item);
    else {
      member_[item] = 1;
      ++size_;
    }
    Link(item);
  }

  void Remove(int64_t item) {
    if (!Contains(item)) return;
    Unlink(item);
    member_[item] = 0;
    --size_;
  }

  // Walk from least to most recent: first item for which `skip` is false, or -1.
  template <typename Skip>
  int64_t LeastRecent(Skip skip) const {
    for (int64_t item = prev_[sentinel_]; item != sentinel_; item = prev_[item]) {
      if (!skip(item)) return item;
    }
    return -1;
  }
  int64_t LeastRecent() const { return size_ == 0 ? -1 : prev_[sentinel_]; }

 private:
  void Unlink(int64_t item) {
    next_[prev_[item]] = next_[item];
    prev_[next_[item]] = prev_[item];
  }
  void Link(int64_t item) {  // at the front (most recent)
    prev_[item] = sentinel_;
    next_[item] = next_[sentinel_];
    prev_[next_[sentinel_]] = item;
    next_[sentinel_] = item;
  }

  std::vector<int64_t> prev_, next_;
  std::vector<char> member_;
  int64_t sentinel_;
  int64_t size_ = 0;
};

}  // namespace moelab::policies::impl
