#include "kernels/weight_matrix.h"

#include "base/error.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace moelab::kernels {
namespace {

QuantFormat QuantFormatOf(WeightFormat format) {
  return format == WeightFormat::kQ8_0 ? QuantFormat::kQ8_0 : QuantFormat::kQ4_0;
}

}  // namespace

std::string ToString(WeightFormat format) {
  return format == WeightFormat::kBf16 ? "bf16" : ToString(QuantFormatOf(format));
}

WeightFormat WeightFormatFromBits(int bits, const std::string& flag) {
  switch (bits) {
    case 16:
      return WeightFormat::kBf16;
    case 8:
      return WeightFormat::kQ8_0;
    case 4:
      return WeightFormat::kQ4_0;
    default:
      throw base::Error(flag + " " + std::to_string(bits) +
                        ": the executor stores weights as 16 (bf16), 8 (q8_0) or 4 (q4_0) bits");
  }
}

double StoredBitsPerWeight(WeightFormat format) {
  return format == WeightFormat::kBf16 ? 16.0 : BitsPerWeight(QuantFormatOf(format));
}

WeightMatrix::WeightMatrix(WeightFormat format, int64_t rows, int64_t cols) : format_(format) {
  if (format == WeightFormat::kBf16) {
    bf16_ = PackedBf16Matrix(rows, cols);
  } else {
    quantized_ = QuantizedMatrix(QuantFormatOf(format), rows, cols);
  }
}

WeightMatrix WeightMatrix::FromPacked(PackedBf16Matrix packed) {
  WeightMatrix w;
  w.bf16_ = std::move(packed);
  return w;
}

double WeightMatrix::StoredBytes() const {
  return format_ == WeightFormat::kBf16 ? 2.0 * static_cast<double>(bf16_.elements())
                                        : quantized_.StoredBytes();
}

void WeightMatrix::PackRows(int64_t row_begin, int64_t count, const Bf16* src) {
  if (format_ == WeightFormat::kBf16) {
    bf16_.PackRows(row_begin, count, src);
  } else {
    quantized_.QuantizeRows(row_begin, count, src);
  }
}

float WeightMatrix::At(int64_t row, int64_t col) const {
  return format_ == WeightFormat::kBf16 ? Bf16ToFloat(bf16_.At(row, col)) : quantized_.At(row, col);
}

void WeightMatrix::UnpackRows(int64_t row_begin, int64_t count, Bf16* dst) const {
  if (format_ == WeightFormat::kBf16) {
    bf16_.UnpackRows(row_begin, count, dst);
    return;
  }
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t c = 0; c < cols(); ++c)
      dst[r * cols() + c] = FloatToBf16(quantized_.At(row_begin + r, c));
  }
}

int64_t TokenTiling::ComputedTokens(int64_t tokens) const {
  if (multiple <= 1 || tokens <= exact_up_to) return tokens;
  return (tokens + multiple - 1) / multiple * multiple;
}

TokenTiling MatmulTokenTiling(WeightFormat format) {
  if (format == WeightFormat::kBf16 && ActiveIsa() == Isa::kAvx512Bf16)
    return {internal::kAvx512Bf16ChunkedDecodeTokens, internal::kAvx512Bf16PrefillTokenLanes};
  return {};
}

std::vector<int64_t> MatmulTokenSeams() {
  return {internal::kDecodeTokens, internal::kAvx512Bf16PackedDecodeTokens,
          internal::kAvx512Bf16ChunkedDecodeTokens};
}

void ReserveMatmulScratch(WeightFormat format, int64_t m, int64_t k) {
  if (format == WeightFormat::kBf16) {
    ReserveBf16MatmulScratch(m, k);
  } else {
    ReserveQuantizedMatmulScratch(m, k);
  }
}

void Matmul(const float* x, int64_t m, const WeightMatrix& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  if (w.format() == WeightFormat::kBf16) {
    MatmulBf16(x, m, w.bf16(), y, ldy, pool);
  } else {
    MatmulQuantized(x, m, w.quantized(), y, ldy, pool);
  }
}

}  // namespace moelab::kernels
