#include "policies/impl/fmoe_prefetch_order.h"

#include <algorithm>
#include <bit>
#include <functional>

namespace moelab::policies::impl {

void FmoePrefetchOrder::Start(int64_t layer, const float* p, const std::vector<double>* counts) {
  const PopularityOrder& popularity = PopularityOrderOf(layer, counts);
  by_popularity_ = &popularity.experts;
  next_ = 0;
  keys_.resize(experts_);
  bool nan = popularity.has_nan;
  for (size_t place = 0; place < experts_; ++place) {
    const float probability = p[popularity.experts[place]];
    nan |= probability != probability;
    const uint32_t bits = std::bit_cast<uint32_t>(probability + 0.0f);  // -0 as +0
    // Negative values' bits all flip, the others' sign bit only: unsigned order is float order.
    const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
    keys_[place] = static_cast<uint64_t>(bits ^ flip) << 32 | (0xFFFFFFFFu - place);
  }
  use_sorted_ = nan;
  if (nan) {
    InsertionSort(p, counts);
  } else if (experts_ > kSelectedExperts) {
    std::sort(keys_.begin(), keys_.end(), std::greater<>());  // keys are distinct: stable
  }
}

int32_t FmoePrefetchOrder::Next() {
  if (use_sorted_) return sorted_[next_++];
  uint64_t key = 0;
  if (experts_ > kSelectedExperts) {
    key = keys_[next_++];
  } else {
    size_t at = 0;
    for (size_t i = 0; i < keys_.size(); ++i) {
      const bool larger = keys_[i] > key;
      key = larger ? keys_[i] : key;
      at = larger ? i : at;
    }
    keys_[at] = 0;  // taken (every real key is above 0: its low half is ~place)
  }
  return (*by_popularity_)[0xFFFFFFFFu - (key & 0xFFFFFFFFu)];
}

const FmoePrefetchOrder::PopularityOrder& FmoePrefetchOrder::PopularityOrderOf(
    int64_t layer, const std::vector<double>* counts) {
  if (static_cast<size_t>(layer) >= popularity_orders_.size())
    popularity_orders_.resize(static_cast<size_t>(layer) + 1);
  PopularityOrder& order = popularity_orders_[static_cast<size_t>(layer)];
  if (!order.experts.empty()) return order;
  order.experts.resize(experts_);
  for (size_t e = 0; e < experts_; ++e) order.experts[e] = static_cast<int32_t>(e);
  if (counts) {
    order.has_nan = std::any_of(counts->begin(), counts->end(), [](double c) { return c != c; });
    if (!order.has_nan) {
      std::stable_sort(order.experts.begin(), order.experts.end(),
                       [&](int32_t a, int32_t b) { return (*counts)[a] > (*counts)[b]; });
    }
  }
  return order;
}

void FmoePrefetchOrder::InsertionSort(const float* p, const std::vector<double>* counts) {
  const auto before = [&](int32_t a, int32_t b) {
    if (p[a] != p[b]) return p[a] > p[b];
    return counts && (*counts)[a] > (*counts)[b];
  };
  sorted_.resize(experts_);
  for (size_t e = 0; e < experts_; ++e) sorted_[e] = static_cast<int32_t>(e);
  for (size_t i = 1; i < sorted_.size(); ++i) {
    const int32_t expert = sorted_[i];
    size_t j = i;
    for (; j > 0 && before(expert, sorted_[j - 1]); --j) sorted_[j] = sorted_[j - 1];
    sorted_[j] = expert;
  }
}

}  // namespace moelab::policies::impl
