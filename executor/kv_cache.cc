#include "executor/kv_cache.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "base/hash.h"

namespace moelab::executor {

namespace {

void CheckCapacity(const ExecutorConfig& config, int64_t capacity) {
  if (capacity < 1 || capacity > config.max_positions) {
    throw base::Error("KV cache capacity must be 1.." + std::to_string(config.max_positions) +
                      " positions (the model's max_positions), got " + std::to_string(capacity));
  }
}

}  // namespace

KvCache::KvCache(const ExecutorConfig& config, int64_t capacity)
    : layers_(config.num_layers), capacity_(capacity), kv_width_(config.kv_width()) {
  CheckCapacity(config, capacity);
  keys_.assign(static_cast<size_t>(layers_ * capacity_ * kv_width_), 0.0f);
  values_.assign(keys_.size(), 0.0f);
}

KvCache::KvCache(const ExecutorConfig& config, int64_t capacity,
                 std::unique_ptr<DeviceKvStorage> device)
    : layers_(config.num_layers),
      capacity_(capacity),
      kv_width_(config.kv_width()),
      device_(std::move(device)) {
  CheckCapacity(config, capacity);
  if (!device_) throw base::Error("internal error: a device KV cache without device storage");
}

void KvCache::Truncate(int64_t new_length) {
  if (new_length < 0 || new_length > length_) {
    throw base::Error("KV cache truncate to " + std::to_string(new_length) + " outside [0, " +
                      std::to_string(length_) + "]");
  }
  length_ = new_length;
}

void KvCache::Append(int64_t count) {
  if (length_ + count > capacity_) {
    throw base::Error("KV cache overflow: " + std::to_string(length_ + count) +
                      " positions, capacity " + std::to_string(capacity_) +
                      " (raise --max-positions or shorten the prompt/output)");
  }
  length_ += count;
}

void KvCache::CopyFrom(const KvCache& other) {
  if (other.layers_ != layers_ || other.kv_width_ != kv_width_ || other.length_ > capacity_) {
    throw base::Error("KV cache copy between caches of different shapes");
  }
  if ((device_ == nullptr) != (other.device_ == nullptr))
    throw base::Error("KV cache copy between host and device caches");
  if (device_) {
    device_->CopyPrefixFrom(*other.device_, other.length_);
    length_ = other.length_;
    return;
  }
  for (int64_t l = 0; l < layers_; ++l) {
    const size_t offset = static_cast<size_t>(l * capacity_ * kv_width_);
    const size_t other_offset = static_cast<size_t>(l * other.capacity_ * kv_width_);
    const size_t count = static_cast<size_t>(other.length_ * kv_width_);
    std::copy_n(other.keys_.data() + other_offset, count, keys_.data() + offset);
    std::copy_n(other.values_.data() + other_offset, count, values_.data() + offset);
  }
  length_ = other.length_;
}

void KvCache::FillSynthetic(int64_t length, uint64_t seed) {
  if (length_ != 0) throw base::Error("a synthetic context fills an empty KV cache");
  Append(length);  // refuses more than the capacity
  const auto value = [](uint64_t hash) {
    return static_cast<float>(static_cast<double>(hash >> 11) * 0x1.0p-52 - 1.0);  // [-1, 1)
  };
  // A device cache gets the same values as a host one, built here and uploaded.
  if (device_) {
    keys_.assign(static_cast<size_t>(layers_ * capacity_ * kv_width_), 0.0f);
    values_.assign(keys_.size(), 0.0f);
  }
  for (int64_t l = 0; l < layers_; ++l) {
    const size_t offset = static_cast<size_t>(l * capacity_ * kv_width_);
    const size_t count = static_cast<size_t>(length * kv_width_);
    const uint64_t base = base::Mix64(seed ^ base::Mix64(static_cast<uint64_t>(l) + 1));
    for (size_t i = 0; i < count; ++i) {
      keys_[offset + i] = value(base::SplitMix64(base + 2 * i));
      values_[offset + i] = value(base::SplitMix64(base + 2 * i + 1));
    }
  }
  if (device_) {
    device_->Upload(keys_, values_, length);
    std::vector<float>().swap(keys_);
    std::vector<float>().swap(values_);
  }
}

}  // namespace moelab::executor
