#pragma once

// (CUDA builds only) A sequence's KV cache in device memory, what the GPU model's NewCache makes.
#include <cstdint>
#include <vector>

#include "base/error.h"
#include "executor/gpu/gpu_memory.h"
#include "executor/kv_cache.h"

namespace moelab::executor::gpu {

// One sequence's keys and values in device memory, [layer][capacity][kv_width] fp32.
class GpuKvStorage final : public DeviceKvStorage {
 public:
  GpuKvStorage(int device, int64_t layers, int64_t capacity, int64_t kv_width)
      : device_(device), layers_(layers), capacity_(capacity), kv_width_(kv_width) {
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    keys_.Grow(layers * capacity * kv_width);
    values_.Grow(layers * capacity * kv_width);
  }
  void CopyPrefixFrom(const DeviceKvStorage& other, int64_t positions) override {
    const auto* from = dynamic_cast<const GpuKvStorage*>(&other);
    if (from == nullptr || from->device_ != device_ || from->kv_width_ != kv_width_ ||
        from->layers_ != layers_ || positions > capacity_ || positions > from->capacity_) {
      throw base::Error("KV cache copy between GPU caches of different devices or shapes");
    }
    if (positions == 0) return;
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    Copy2D(keys_.get(), from->keys_.get(), from->capacity_, positions, cudaMemcpyDeviceToDevice);
    Copy2D(values_.get(), from->values_.get(), from->capacity_, positions,
           cudaMemcpyDeviceToDevice);
  }
  void Upload(const std::vector<float>& keys, const std::vector<float>& values,
              int64_t positions) override {
    if (static_cast<int64_t>(keys.size()) != layers_ * capacity_ * kv_width_ ||
        keys.size() != values.size() || positions > capacity_) {
      throw base::Error("internal error: KV upload of the wrong size");
    }
    if (positions == 0) return;
    MOELAB_CUDA_CHECK(cudaSetDevice(device_));
    Copy2D(keys_.get(), keys.data(), capacity_, positions, cudaMemcpyHostToDevice);
    Copy2D(values_.get(), values.data(), capacity_, positions, cudaMemcpyHostToDevice);
  }
  float* keys() const { return keys_.get(); }
  float* values() const { return values_.get(); }
  int64_t capacity() const { return capacity_; }

 private:
  // The first `positions` of every layer: one 2-D copy, a layer per row.
  void Copy2D(float* to, const float* from, int64_t from_capacity, int64_t positions,
              cudaMemcpyKind kind) const {
    MOELAB_CUDA_CHECK(cudaMemcpy2D(to, static_cast<size_t>(capacity_ * kv_width_) * sizeof(float),
                                   from,
                                   static_cast<size_t>(from_capacity * kv_width_) * sizeof(float),
                                   static_cast<size_t>(positions * kv_width_) * sizeof(float),
                                   static_cast<size_t>(layers_), kind));
  }

  int device_;
  int64_t layers_, capacity_, kv_width_;
  DeviceArray<float> keys_, values_;
};

}  // namespace moelab::executor::gpu
