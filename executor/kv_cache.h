#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "executor/executor_config.h"

namespace moelab::executor {

// Keys and values held in an accelerator's memory (the GPU backend's), same layout as the host
// cache: [layer][position][kv_width] fp32. KvCache keeps the length; the storage moves the bytes.
class DeviceKvStorage {
 public:
  virtual ~DeviceKvStorage() = default;
  // The first `positions` positions of every layer from `other` (a storage of the same device).
  virtual void CopyPrefixFrom(const DeviceKvStorage& other, int64_t positions) = 0;
  // Host [layer][capacity][kv_width] keys and values, the first `positions` of each layer.
  virtual void Upload(const std::vector<float>& keys, const std::vector<float>& values,
                      int64_t positions) = 0;
};

// One sequence's keys and values for every layer, fp32, [layer][position][kv_heads * head_dim],
// in host memory or, with a DeviceKvStorage, in the device's. Speculative decoding rolls back
// rejected positions with Truncate; beam search copies a parent's cache into a child with
// CopyFrom.
class KvCache {
 public:
  KvCache(const ExecutorConfig& config, int64_t capacity);
  // In a device's memory; keys() and values() are then null.
  KvCache(const ExecutorConfig& config, int64_t capacity, std::unique_ptr<DeviceKvStorage> device);

  int64_t length() const { return length_; }
  int64_t capacity() const { return capacity_; }
  float* keys(int64_t layer) {
    return device_ ? nullptr : keys_.data() + layer * capacity_ * kv_width_;
  }
  float* values(int64_t layer) {
    return device_ ? nullptr : values_.data() + layer * capacity_ * kv_width_;
  }
  DeviceKvStorage* device_storage() const { return device_.get(); }

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
  std::unique_ptr<DeviceKvStorage> device_;
};

}  // namespace moelab::executor
