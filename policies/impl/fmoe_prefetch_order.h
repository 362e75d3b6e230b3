#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

// fMoE's prefetch order at one layer: the matched map's experts in the order a stable sort by
// probability (highest first, ties by calibration popularity, highest first, then by index)
// gives, handed out one at a time, since a prefetch usually stops after a few. Each expert is a
// key: the probability's order-keeping bits, then its place in the layer's stable popularity
// order (earlier: larger). Up to kSelectedExperts experts the next is the largest key left,
// found without branches; more are sorted once. The stable insertion sort this replaces
// mispredicted its comparisons (a tenth of a batch-1 simulation of Mixtral). A NaN probability,
// or a layer whose popularity holds one, takes that insertion sort: a NaN compares false with
// everything, which no key order reproduces.
namespace moelab::policies::impl {

class FmoePrefetchOrder {
 public:
  static constexpr size_t kSelectedExperts = 32;

  explicit FmoePrefetchOrder(int64_t experts) : experts_(static_cast<size_t>(experts)) {}

  // Starts layer `layer`'s order for the probabilities p[0, experts); `counts` is the layer's
  // calibration popularity (null: none). The same layer must come with the same counts.
  void Start(int64_t layer, const float* p, const std::vector<double>* counts);
  // The next expert; at most `experts` calls after Start.
  int32_t Next();

 private:
  struct PopularityOrder {
    std::vector<int32_t> experts;  // stably sorted by popularity, highest first
    bool has_nan = false;
  };
  const PopularityOrder& PopularityOrderOf(int64_t layer, const std::vector<double>* counts);
  void InsertionSort(const float* p, const std::vector<double>* counts);

  size_t experts_;
  std::vector<PopularityOrder> popularity_orders_;  // [layer], built on first use
  const std::vector<int32_t>* by_popularity_ = nullptr;
  std::vector<uint64_t> keys_;
  std::vector<int32_t> sorted_;  // the insertion sort's order
  bool use_sorted_ = false;
  size_t next_ = 0;
};

}  // namespace moelab::policies::impl
