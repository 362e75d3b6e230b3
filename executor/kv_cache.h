#pragma once

#include <cstdint>
#include <vector>

#include "executor/executor_config.h"

namespace moelab::executor {

// One sequence's keys and values for every layer, fp32, [layer][position][kv_heads * head_dim].
// Speculative decoding rolls back rejected positions with Truncate; beam search copies a parent's
// cache into a child with CopyFrom.
class KvCache {
 public:
  KvCache(const ExecutorConfig& config, int64_t capacity);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  float* keys(int64_t layer) { return keys_.data() + layer * capacity_ * kv_width_; }
  float* values(int64_t layer) { return values_.data() + layer * capacity_ * kv_width_; }

  void Truncate(int64_t new_length);    // refuses growing
  void Append(int64_t count);           // after a forward pass wrote `count` new positions
  void CopyFrom(const KvCache& other);  // same shape; copies the first other.length() positions
  // Starts an empty cache with `length` positions of seeded keys and values in [-1, 1): a long
  // context without paying its prefill, for measuring decode at that context (attention reads
  // every cached position; what they hold does not change its time).
  void FillSynthetic(int64_t length, uint64_t seed);

 private:
  int64_t layers_;
  int64_t capacity_;
  int64_t kv_width_;
  int64_t length_ = 0;
  std::vector<float> keys_;
  std::vector<float> values_;
};

}  // namespace moelab::executor
