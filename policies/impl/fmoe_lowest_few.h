#pragma once

#include <cstdint>
#include <limits>

// fMoE's eviction walk remembers more than its answer: the few cached experts of lowest
// eviction value, in eviction order. While the values and the set of candidates do not change
// except by removals (one planning step: a layer's demand misses, or one layer's prefetches), the
// next victim is the first of them still a candidate, so the walk over the whole cache is
// repeated only when all of them are gone.
namespace moelab::policies::impl {

class FmoeLowestFew {
 public:
  // Two: a planning step evicts one or two experts mostly; keeping more costs more insertions
  // per walk than the walks it saves (fMoE at batch 1: 2 kept 491 M instructions, 3 499 M, 4
  // 508 M, none 515 M).
  static constexpr int kSize = 2;

  // Offered in increasing index; keeps the kSize lowest (value, index) pairs in that order (a
  // value equal to a kept one goes after it: the earlier index first, as a strict `<` scan). The
  // values must be ordered (no NaN). Only a value below Bar() changes anything.
  void Offer(int64_t index, double value) {
    if (!(value < Bar())) return;
    int at = count_ < kSize ? count_++ : kSize - 1;
    for (; at > 0 && value < values_[at - 1]; --at) {
      values_[at] = values_[at - 1];
      indices_[at] = indices_[at - 1];
    }
    values_[at] = value;
    indices_[at] = index;
  }
  double Bar() const {
    return count_ < kSize ? std::numeric_limits<double>::infinity() : values_[kSize - 1];
  }

  // The first kept index `still(index)` accepts, or -1 when none does.
  template <typename Still>
  int64_t First(Still still) const {
    for (int i = 0; i < count_; ++i) {
      if (still(indices_[i])) return indices_[i];
    }
    return -1;
  }

  bool empty() const { return count_ == 0; }
  void clear() { count_ = 0; }

 private:
  int count_ = 0;
  double values_[kSize];
  int64_t indices_[kSize];
};

}  // namespace moelab::policies::impl
