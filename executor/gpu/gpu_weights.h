#pragma once

// The GPU model's weights in device memory (CUDA builds only): bf16 matrices with rows padded to
// Ld(cols), uploaded once from the CPU's weights; a layer's norms, attention, router and FFNs.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/gpu/gpu_memory.h"
#include "executor/gpu/gpu_quantized_kernels.h"
#include "executor/weights.h"

namespace moelab::executor::gpu {

struct FfnView {
  int64_t width = 0;
  MatrixView gate_up;
  MatrixView down;
};

// A matmul weight the model owns (zero padding past `cols`).
struct DeviceMatrix {
  DeviceArray<uint16_t> data;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  MatrixView view() const { return {data.get(), rows, cols, ld}; }
};

// A block-quantized matmul weight (routed experts at --expert-bits 8 or 4), its records as the CPU
// stores them (kernels::QuantizedMatrix).
struct DeviceQuantizedMatrix {
  DeviceArray<uint8_t> records;
  int64_t rows = 0;
  int64_t cols = 0;
  bool q4_0 = false;
  QuantizedWeightsView view() const { return {records.get(), rows, cols, q4_0}; }
};

DeviceMatrix UploadRowMajor(const kernels::Bf16* row_major, int64_t rows, int64_t cols);
DeviceMatrix Upload(const kernels::PackedBf16Matrix& packed);
// Refuses a quantized matrix (`what` names its flag): the GPU backend has bf16 kernels only.
DeviceMatrix Upload(const kernels::WeightMatrix& matrix, const std::string& what);

// A SwiGLU FFN: bf16 (gate_up, down), or for routed experts also block-quantized
// (quantized_gate_up, quantized_down; `quantized` set).
struct DeviceFfn {
  int64_t width = 0;
  DeviceMatrix gate_up;
  DeviceMatrix down;
  bool quantized = false;
  DeviceQuantizedMatrix quantized_gate_up;
  DeviceQuantizedMatrix quantized_down;
  FfnView view() const { return {width, gate_up.view(), down.view()}; }
};

// An expert in one of the offload tier's device buffers (GpuExpertTier's layout).
inline FfnView ExpertInBuffer(const uint16_t* buffer, int64_t hidden, int64_t width,
                              int64_t down_offset) {
  return {width,
          {buffer, 2 * width, hidden, Ld(hidden)},
          {buffer + down_offset, hidden, width, Ld(width)}};
}

DeviceFfn Upload(const FfnWeights& ffn, const std::string& what);
// The same, keeping q8_0 / q4_0 matrices quantized (routed experts).
DeviceFfn UploadExpert(const FfnWeights& ffn);
DeviceArray<float> UploadVector(const std::vector<float>& host);

struct DeviceLayer {
  DeviceArray<float> attention_norm, ffn_norm, qkv_bias, q_norm, k_norm;
  DeviceMatrix qkv, output, router, shared_gate;
  std::vector<DeviceFfn> experts;
  DeviceFfn shared, dense;
};

}  // namespace moelab::executor::gpu
