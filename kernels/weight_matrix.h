#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>
#include <span>
#include <string>

#include "kernels/packed_matrix.h"
#include "kernels/quantized_matrix.h"
#include "kernels/thread_pool.h"

namespace moelab::kernels {

// How the executor stores a matmul weight: bf16 (PackedBf16Matrix) or block-quantized
// (QuantizedMatrix). `moelab run --expert-bits 16|8|4` picks bf16, q8_0 or q4_0.
enum class WeightFormat { kBf16, kQ8_0, kQ4_0 };

std::string ToString(WeightFormat format);
// 16 -> bf16, 8 -> q8_0, 4 -> q4_0; anything else is a moelab::Error naming `flag` and the accepted
// values.
WeightFormat WeightFormatFromBits(int bits, const std::string& flag);
// Stored bits per weight including block scales: 16, 8.5, 4.5.
double StoredBitsPerWeight(WeightFormat format);

// One matmul weight [rows][cols] in its format. Filled part by part from row-major bf16 (fused
// q|k|v and gate|up load one part at a time; quantized formats quantize each row on its own);
// concurrent fills of disjoint 16-row ranges never share a vector or a quantization group.
class WeightMatrix {
 public:
  WeightMatrix() = default;
  WeightMatrix(WeightFormat format, int64_t rows, int64_t cols);  // zero
  static WeightMatrix FromPacked(PackedBf16Matrix packed);

  WeightFormat format() const { return format_; }
  int64_t rows() const { return format_ == WeightFormat::kBf16 ? bf16_.rows() : quantized_.rows(); }
  int64_t cols() const { return format_ == WeightFormat::kBf16 ? bf16_.cols() : quantized_.cols(); }
  bool empty() const { return rows() == 0; }
  int64_t elements() const { return rows() * cols(); }
  // Bytes as stored (bf16: 2 per element; quantized: quants and scales), padding excluded.
  double StoredBytes() const;

  // Rows [row_begin, row_begin + count) from row-major bf16 [count][cols].
  void PackRows(int64_t row_begin, int64_t count, const Bf16* src);
  // Element (row, col) as the kernels multiply it (exact in fp32).
  float At(int64_t row, int64_t col) const;
  // Rows back to row-major bf16 (quantized values rounded to bf16: saving a quantized model is
  // lossy).
  void UnpackRows(int64_t row_begin, int64_t count, Bf16* dst) const;

  // The stored bytes in the kernels' layout (padding included), for copying a matrix to a file
  // and back into a matrix of the same format and shape (the offload store).
  std::span<const std::byte> Storage() const {
    return format_ == WeightFormat::kBf16
               ? std::as_bytes(
                     std::span(bf16_.data(), static_cast<size_t>(bf16_.storage_elements())))
               : std::as_bytes(
                     std::span(quantized_.data(), static_cast<size_t>(quantized_.storage_bytes())));
  }
  std::span<std::byte> MutableStorage() {
    return format_ == WeightFormat::kBf16
               ? std::as_writable_bytes(
                     std::span(bf16_.mutable_data(), static_cast<size_t>(bf16_.storage_elements())))
               : std::as_writable_bytes(std::span(quantized_.mutable_data(),
                                                  static_cast<size_t>(quantized_.storage_bytes())));
  }

  const PackedBf16Matrix& bf16() const { return bf16_; }
  const QuantizedMatrix& quantized() const { return quantized_; }

 private:
  WeightFormat format_ = WeightFormat::kBf16;
  PackedBf16Matrix bf16_;
  QuantizedMatrix quantized_;
};

// The token rows Matmul's register tiles compute for m tokens of one call on the active
// instruction set. AVX512-BF16 prefill (bf16 weights, more than kAvx512Bf16ChunkedDecodeTokens
// tokens) holds 16 tokens per vector and a partial vector costs a whole one: an expert FFN of 49
// to 64 tokens takes as long as one of 64 (bench: 48 -> 8.3 ms, 49 -> 11.6, 64 -> 11.0 on the
// default expert). Every other path sizes its last tile to the tokens left (exact).
struct TokenTiling {
  int64_t exact_up_to = 0;  // calls of up to this many tokens compute exactly their tokens
  int64_t multiple = 1;     // above it, tokens are computed in multiples of this
  int64_t ComputedTokens(int64_t tokens) const;
  bool exact() const { return multiple <= 1; }
};
TokenTiling MatmulTokenTiling(WeightFormat format);

// Token counts after which some CPU kernel (any ISA, any format) changes its register tile or its
// number of passes over the weights, ascending: a call of s + 1 tokens can cost a step more than
// one of s (AVX512-BF16 packed decode: one pass to 8 tokens on 3 row groups, to 12 on 2, then two
// chunks to 24, then the prefill tiles). A profile samples both sides of each, so interpolation
// between its points never smooths a step over (profiler/profile_grid.h).
std::vector<int64_t> MatmulTokenSeams();

// ReserveBf16MatmulScratch or ReserveQuantizedMatmulScratch (kernels/matmul.h) for `format`.
void ReserveMatmulScratch(WeightFormat format, int64_t m, int64_t k);

// y = x W^T for any format (kernels/matmul.h: MatmulBf16 or MatmulQuantized).
void Matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, int64_t ldy,
            ThreadPool& pool);

}  // namespace moelab::kernels
