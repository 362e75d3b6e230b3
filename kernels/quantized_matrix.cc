#include "kernels/quantized_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "kernels/quantized_activations.h"

namespace moelab::kernels {

std::string ToString(QuantFormat format) { return format == QuantFormat::kQ8_0 ? "q8_0" : "q4_0"; }

double BitsPerWeight(QuantFormat format) {
  return (format == QuantFormat::kQ8_0 ? 8.0 : 4.0) + 16.0 / static_cast<double>(kQuantBlock);
}

QuantizedMatrix::QuantizedMatrix(QuantFormat format, int64_t rows, int64_t cols)
    : format_(format), rows_(rows), cols_(cols) {
  // q4_0 zero is q = 8 (both nibbles), scale 0 keeps the value 0 either way.
  storage_.assign(static_cast<size_t>(groups() * blocks() * record_bytes()), 0);
}

double QuantizedMatrix::StoredBytes() const {
  return static_cast<double>(rows_) * static_cast<double>(blocks() * kQuantBlock) *
         BitsPerWeight(format_) / 8.0;
}

int64_t QuantizedMatrix::QuantByte(int64_t j, int64_t lane) const {
  // q4_0 keeps elements j and j + 16 in one byte (low and high nibble).
  const int64_t e = format_ == QuantFormat::kQ8_0 ? j : j % (kQuantBlock / 2);
  return 32 * (e / 4) + 4 * lane + e % 4;
}

void QuantizedMatrix::QuantizeRows(int64_t row_begin, int64_t count, const Bf16* src) {
  for (int64_t r = 0; r < count; ++r) {
    const int64_t row = row_begin + r, g = row / kGroupRows, lane = row % kGroupRows;
    for (int64_t b = 0; b < blocks(); ++b) {
      const int64_t begin = b * kQuantBlock, end = std::min(cols_, begin + kQuantBlock);
      float w[kQuantBlock] = {};
      for (int64_t c = begin; c < end; ++c) w[c - begin] = Bf16ToFloat(src[r * cols_ + c]);
      float largest = 0;  // the element of largest magnitude, with its sign
      for (float v : w) {
        if (!std::isfinite(v))
          throw base::Error("quantizing to " + ToString(format_) + ": row " + std::to_string(row) +
                            " has a non-finite weight");
        if (std::fabs(v) > std::fabs(largest)) largest = v;
      }
      const float wanted =
          format_ == QuantFormat::kQ8_0 ? std::fabs(largest) / 127.0f : largest / -8.0f;
      const Fp16 scale_bits = FloatToFp16(wanted);
      const float d = Fp16ToFloat(scale_bits);
      if (!std::isfinite(d)) {
        throw base::Error("quantizing to " + ToString(format_) + ": row " + std::to_string(row) +
                          " block " + std::to_string(b) + " needs a scale of " +
                          std::to_string(wanted) + ", beyond fp16's 65504");
      }
      uint8_t* record = storage_.data() + (g * blocks() + b) * record_bytes();
      std::memcpy(record + 2 * lane, &scale_bits, sizeof(scale_bits));
      uint8_t* quants = record + 16;
      const float inverse = d != 0 ? 1.0f / d : 0.0f;
      for (int64_t j = 0; j < kQuantBlock; ++j) {
        if (format_ == QuantFormat::kQ8_0) {
          const float q = std::clamp(RoundToNearestEven(w[j] * inverse), -127.0f, 127.0f);
          quants[QuantByte(j, lane)] = static_cast<uint8_t>(static_cast<int8_t>(q));
        } else {
          const uint8_t q = static_cast<uint8_t>(
              std::clamp(RoundToNearestEven(w[j] * inverse) + 8.0f, 0.0f, 15.0f));
          uint8_t& byte = quants[QuantByte(j, lane)];
          byte = j < kQuantBlock / 2 ? static_cast<uint8_t>((byte & 0xf0) | q)
                                     : static_cast<uint8_t>((byte & 0x0f) | (q << 4));
        }
      }
    }
  }
}

float QuantizedMatrix::Scale(int64_t row, int64_t block) const {
  Fp16 bits;
  std::memcpy(&bits, group(row / kGroupRows) + block * record_bytes() + 2 * (row % kGroupRows),
              sizeof(bits));
  return Fp16ToFloat(bits);
}

int QuantizedMatrix::Quant(int64_t row, int64_t col) const {
  const int64_t j = col % kQuantBlock, lane = row % kGroupRows;
  const uint8_t byte =
      group(row / kGroupRows)[(col / kQuantBlock) * record_bytes() + 16 + QuantByte(j, lane)];
  if (format_ == QuantFormat::kQ8_0) return static_cast<int8_t>(byte);
  return (j < kQuantBlock / 2 ? byte & 0x0f : byte >> 4) - 8;
}

float QuantizedMatrix::At(int64_t row, int64_t col) const {
  return Scale(row, col / kQuantBlock) * static_cast<float>(Quant(row, col));
}

}  // namespace moelab::kernels
