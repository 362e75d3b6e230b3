#include "executor/gpu/gpu_weights.h"

#include <cstring>

#include "base/error.h"

namespace moelab::executor::gpu {

DeviceMatrix UploadRowMajor(const kernels::Bf16* row_major, int64_t rows, int64_t cols) {
  DeviceMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.ld = Ld(cols);
  std::vector<uint16_t> padded(static_cast<size_t>(rows * m.ld), 0);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(padded.data() + r * m.ld, row_major + r * cols, static_cast<size_t>(cols) * 2);
  m.data.Upload(padded);
  return m;
}

DeviceMatrix Upload(const kernels::PackedBf16Matrix& packed) {
  std::vector<kernels::Bf16> row_major(static_cast<size_t>(packed.rows() * packed.cols()));
  if (!row_major.empty()) packed.UnpackRows(0, packed.rows(), row_major.data());
  return UploadRowMajor(row_major.data(), packed.rows(), packed.cols());
}

DeviceMatrix Upload(const kernels::WeightMatrix& matrix, const std::string& what) {
  if (matrix.format() != kernels::WeightFormat::kBf16) {
    throw base::Error("--device gpu runs bf16 weights; " + what + " are " +
                      kernels::ToString(matrix.format()) +
                      " (the GPU backend quantizes routed experts only: use --attention-bits 16)");
  }
  return Upload(matrix.bf16());
}

DeviceFfn Upload(const FfnWeights& ffn, const std::string& what) {
  DeviceFfn d;
  d.width = ffn.width;
  if (ffn.width == 0) return d;
  d.gate_up = Upload(ffn.gate_up, what);
  d.down = Upload(ffn.down, what);
  return d;
}

namespace {

DeviceQuantizedMatrix UploadQuantized(const kernels::QuantizedMatrix& matrix) {
  DeviceQuantizedMatrix d;
  d.rows = matrix.rows();
  d.cols = matrix.cols();
  d.q4_0 = matrix.format() == kernels::QuantFormat::kQ4_0;
  d.records.Upload(matrix.data(), matrix.storage_bytes());
  return d;
}

}  // namespace

DeviceFfn UploadExpert(const FfnWeights& ffn) {
  if (ffn.width == 0 || ffn.gate_up.format() == kernels::WeightFormat::kBf16)
    return Upload(ffn, "experts (--expert-bits)");
  DeviceFfn d;
  d.width = ffn.width;
  d.quantized = true;
  d.quantized_gate_up = UploadQuantized(ffn.gate_up.quantized());
  d.quantized_down = UploadQuantized(ffn.down.quantized());
  return d;
}

DeviceArray<float> UploadVector(const std::vector<float>& host) {
  DeviceArray<float> d;
  if (!host.empty()) d.Upload(host);
  return d;
}

}  // namespace moelab::executor::gpu
