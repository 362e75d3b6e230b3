#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/fp16.h"

namespace moelab::kernels {

// Block-quantized weight formats (llama.cpp's Q8_0 / Q4_0 arithmetic): every run of 32 elements of
// a row along k shares one fp16 scale d.
//   q8_0: q = round(w / d) in [-127, 127], d = max|w| / 127; value d * q.   8.5 bits per weight.
//   q4_0: q = round(w / d) + 8 in [0, 15], d = m / -8 with m the block's element of largest
//         magnitude (so m itself is exact); value d * (q - 8).             4.5 bits per weight.
// Every stored value d * q is exact in fp32 (11-bit scale x 8-bit integer), so every path that
// multiplies it by an activation with one FMA computes the same bits.
enum class QuantFormat { kQ8_0, kQ4_0 };

std::string ToString(QuantFormat format);

constexpr int64_t kQuantBlock = 32;  // elements per scale
// Stored bits per weight including the scale (what weight accounting counts).
double BitsPerWeight(QuantFormat format);

// A quantized [rows][cols] matrix in the layout the lanes-are-rows integer kernels stream: rows are
// taken 8 at a time (a group); for group g and k block b one record holds the 8 rows' fp16 scales
// (16 bytes) then the quants as 32-byte vectors whose dword r is row 8g + r (so one vpmaddubsw
// multiplies 4 consecutive elements of each of 8 rows by one broadcast dword of activations):
//   q8_0: byte 32v + 4r + i is element 4v + i of the block (v < 8);
//   q4_0: byte 32v + 4r + i holds element 4v + i (low nibble) and 16 + 4v + i (high nibble) (v <
//   4).
// Rows past `rows` are zero bytes (scale 0); elements past `cols` quantize 0 (q4_0: quant 8).
// Records are contiguous, group-major, so a group is one sequential stream.
class QuantizedMatrix {
 public:
  static constexpr int64_t kGroupRows = 8;

  QuantizedMatrix() = default;
  QuantizedMatrix(QuantFormat format, int64_t rows, int64_t cols);  // all zero

  QuantFormat format() const { return format_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t blocks() const { return (cols_ + kQuantBlock - 1) / kQuantBlock; }
  int64_t groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  int64_t record_bytes() const { return RecordBytes(format_); }
  static constexpr int64_t RecordBytes(QuantFormat format) {
    return 16 + (format == QuantFormat::kQ8_0 ? 256 : 128);
  }
  const uint8_t* group(int64_t g) const { return storage_.data() + g * blocks() * record_bytes(); }
  // The records as stored (padding included): what the offload store copies in and out.
  const uint8_t* data() const { return storage_.data(); }
  uint8_t* mutable_data() { return storage_.data(); }
  int64_t storage_bytes() const { return static_cast<int64_t>(storage_.size()); }
  // Bytes of scales and quants for the rows x cols elements (padding excluded).
  double StoredBytes() const;

  // Quantizes rows [row_begin, row_begin + count) from row-major bf16 [count][cols]. Rows are
  // independent, so fused matrices load one part at a time and tasks may fill disjoint 8-row groups
  // concurrently. Refuses (moelab::Error) a block whose scale does not fit fp16.
  void QuantizeRows(int64_t row_begin, int64_t count, const Bf16* src);
  // Element (row, col) as stored: d * q (exact in fp32).
  float At(int64_t row, int64_t col) const;
  // Its signed integer: q (q8_0) or q - 8 (q4_0); 0 past cols.
  int Quant(int64_t row, int64_t col) const;
  // The block scale of (row, block).
  float Scale(int64_t row, int64_t block) const;

 private:
  // Offset in a record's quants of element j (< 32) of the group's row `lane`.
  int64_t QuantByte(int64_t j, int64_t lane) const;

  QuantFormat format_ = QuantFormat::kQ8_0;
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<uint8_t> storage_;
};

}  // namespace moelab::kernels
