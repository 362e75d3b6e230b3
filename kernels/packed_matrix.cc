#include "kernels/packed_matrix.h"

#include <cstring>

namespace moelab::kernels {

PackedBf16Matrix::PackedBf16Matrix(int64_t rows, int64_t cols)
    : rows_(rows),
      cols_(cols),
      storage_(static_cast<size_t>(groups() * group_elements() + kReadPadding), 0) {}

PackedBf16Matrix PackedBf16Matrix::Pack(const Bf16* w, int64_t rows, int64_t cols) {
  PackedBf16Matrix packed(rows, cols);
  packed.PackRows(0, rows, w);
  return packed;
}

void PackedBf16Matrix::PackRows(int64_t row_begin, int64_t count, const Bf16* src) {
  for (int64_t r = 0; r < count; ++r) {
    const Bf16* row = src + r * cols_;
    // A row's pairs are 64 bytes apart: copy them as 32-bit words.
    Bf16* out = storage_.data() + Offset(row_begin + r, 0);
    int64_t c = 0;
    for (; c + 2 <= cols_; c += 2, out += 2 * kGroupRows)
      std::memcpy(out, row + c, 2 * sizeof(Bf16));
    if (c < cols_) out[0] = row[c];
  }
}

void PackedBf16Matrix::UnpackRows(int64_t row_begin, int64_t count, Bf16* dst) const {
  for (int64_t r = 0; r < count; ++r) {
    Bf16* row = dst + r * cols_;
    const Bf16* in = storage_.data() + Offset(row_begin + r, 0);
    int64_t c = 0;
    for (; c + 2 <= cols_; c += 2, in += 2 * kGroupRows) std::memcpy(row + c, in, 2 * sizeof(Bf16));
    if (c < cols_) row[c] = in[0];
  }
}

}  // namespace moelab::kernels
