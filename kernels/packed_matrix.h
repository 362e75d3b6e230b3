#pragma once

#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "kernels/bf16.h"

namespace moelab::kernels {

// A bf16 weight matrix [rows][cols] (a Linear layer's [out][in]) in the VNNI pair layout the
// AVX512-BF16 decode kernel reads without transposing: rows are taken 16 at a time (a group), and
// for group g and k-pair p one 64-byte vector holds (w[16g + r][2p], w[16g + r][2p + 1]) for
// r = 0..15 -- lane r of a vdpbf16ps is output row 16g + r. Rows past `rows` and the second element
// of the last pair for odd `cols` are zero. Group g, pair p starts at data() + (g * pairs() + p)
// * 32.
class PackedBf16Matrix {
 public:
  static constexpr int64_t kGroupRows = 16;
  // Zero elements after the last group: the fp32-FMA kernels read each pair vector a second time
  // one element later (kernels/matmul_row_lanes.h), 2 bytes past the last vector.
  static constexpr int64_t kReadPadding = 32;

  PackedBf16Matrix() = default;
  // Zero-filled.
  PackedBf16Matrix(int64_t rows, int64_t cols);
  // From row-major w [rows][cols].
  static PackedBf16Matrix Pack(const Bf16* w, int64_t rows, int64_t cols);

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  bool empty() const { return rows_ == 0; }
  int64_t pairs() const { return (cols_ + 1) / 2; }
  int64_t groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  // Bf16 elements of one group (pairs() vectors of 32).
  int64_t group_elements() const { return pairs() * 2 * kGroupRows; }
  // Elements the matrix holds (rows x cols, padding excluded): what weight accounting counts.
  int64_t elements() const { return rows_ * cols_; }

  const Bf16* data() const { return storage_.data(); }
  // The packed storage as stored (padding included): what the offload store copies in and out.
  Bf16* mutable_data() { return storage_.data(); }
  int64_t storage_elements() const { return static_cast<int64_t>(storage_.size()); }
  const Bf16* group(int64_t g) const { return data() + g * group_elements(); }

  int64_t Offset(int64_t row, int64_t col) const {
    return ((row / kGroupRows * pairs() + col / 2) * kGroupRows + row % kGroupRows) * 2 + col % 2;
  }
  Bf16 At(int64_t row, int64_t col) const {
    return storage_[static_cast<size_t>(Offset(row, col))];
  }
  void Set(int64_t row, int64_t col, Bf16 value) {
    storage_[static_cast<size_t>(Offset(row, col))] = value;
  }

  // Rows [row_begin, row_begin + count) from / to row-major [count][cols] (fused matrices such as
  // q|k|v or gate|up are loaded and saved one part at a time).
  void PackRows(int64_t row_begin, int64_t count, const Bf16* src);
  void UnpackRows(int64_t row_begin, int64_t count, Bf16* dst) const;

 private:
  // 64-byte aligned: the kernels read one group-pair vector with one aligned load.
  template <typename T>
  struct AlignedAllocator {
    using value_type = T;
    AlignedAllocator() = default;
    template <typename U>
    AlignedAllocator(const AlignedAllocator<U>&) {}
    T* allocate(size_t count) {
      void* p = std::aligned_alloc(64, (count * sizeof(T) + 63) / 64 * 64);
      if (p == nullptr) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t) { std::free(p); }
    bool operator==(const AlignedAllocator&) const { return true; }
  };

  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::vector<Bf16, AlignedAllocator<Bf16>> storage_;
};

}  // namespace moelab::kernels
