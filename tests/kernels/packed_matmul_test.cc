// PackedBf16Matrix: the layout round-trips, and a matmul on packed weights equals the row-major
// matmul bit for bit on every instruction set (the executor keeps packed weights; the row-major
// kernels are the ones checked against float64 in matmul_test.cc).
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "tests/kernels/random_inputs.h"

#include "kernels/cpu_features.h"
#include "kernels/expert_ffn.h"
#include "kernels/matmul.h"
#include "kernels/packed_matrix.h"

namespace moelab::kernels {
namespace {

using testing::RandomActivations;
using testing::RandomWeights;

TEST(PackedBf16Matrix, PackAndAccessorRoundTrip) {
  for (int64_t rows : {1, 15, 16, 17, 40}) {
    for (int64_t cols : {1, 2, 7, 33}) {
      const std::vector<Bf16> w =
          RandomWeights(rows * cols, static_cast<uint32_t>(rows * 100 + cols));
      const PackedBf16Matrix packed = PackedBf16Matrix::Pack(w.data(), rows, cols);
      EXPECT_EQ(packed.rows(), rows);
      EXPECT_EQ(packed.cols(), cols);
      EXPECT_EQ(packed.elements(), rows * cols);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(packed.data()) % 64, 0u);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c)
          ASSERT_EQ(packed.At(r, c), w[r * cols + c]) << rows << "x" << cols;
      }
      // Layout: group g, pair p is one 32-element vector, lane r holds row 16g + r's pair; padding
      // zero.
      for (int64_t g = 0; g < packed.groups(); ++g) {
        for (int64_t p = 0; p < packed.pairs(); ++p) {
          for (int64_t lane = 0; lane < 16; ++lane) {
            for (int64_t e = 0; e < 2; ++e) {
              const int64_t r = 16 * g + lane, c = 2 * p + e;
              const Bf16 expected = r < rows && c < cols ? w[r * cols + c] : Bf16{0};
              ASSERT_EQ(packed.group(g)[(p * 16 + lane) * 2 + e], expected);
            }
          }
        }
      }
      std::vector<Bf16> back(w.size());
      packed.UnpackRows(0, rows, back.data());
      EXPECT_EQ(back, w);
      // Part by part (fused q|k|v, gate|up) gives the same matrix.
      PackedBf16Matrix parts(rows, cols);
      const int64_t split = rows / 3;
      parts.PackRows(0, split, w.data());
      parts.PackRows(split, rows - split, w.data() + split * cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(parts.At(r, c), w[r * cols + c]);
      }
    }
  }
}

class PackedMatmulTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override { testing::UseIsaOrSkip(GetParam()); }
  void TearDown() override { SetActiveIsa(SupportedIsas().back()); }
};

TEST_P(PackedMatmulTest, EqualsRowMajorBitForBit) {
  ThreadPool pool(2);
  uint32_t seed = 7;
  for (int64_t k : {1, 7, 33, 517, 1031}) {
    for (int64_t n : {1, 5, 17, 70, 300}) {
      const std::vector<Bf16> w = RandomWeights(n * k, seed++);
      const PackedBf16Matrix packed = PackedBf16Matrix::Pack(w.data(), n, k);
      for (int64_t m = 1; m <= 26; ++m) {  // to 26: every chunked-decode count and past it
        const std::vector<float> x = RandomActivations(m * k, seed++);
        const int64_t ldy = n + 3;
        std::vector<float> row_major(m * ldy, -7.0f), from_packed(m * ldy, -7.0f);
        MatmulBf16(x.data(), m, k, w.data(), n, row_major.data(), ldy, pool);
        MatmulBf16(x.data(), m, packed, from_packed.data(), ldy, pool);
        ASSERT_EQ(
            0, std::memcmp(row_major.data(), from_packed.data(), row_major.size() * sizeof(float)))
            << ToString(GetParam()) << " m=" << m << " k=" << k << " n=" << n;
        std::vector<Bf16> x_bf16(x.size());
        ConvertToBf16(x.data(), m * k, x_bf16.data());
        std::fill(from_packed.begin(), from_packed.end(), -7.0f);
        MatmulBf16Bf16(x_bf16.data(), m, packed, from_packed.data(), ldy, pool);
        ASSERT_EQ(
            0, std::memcmp(row_major.data(), from_packed.data(), row_major.size() * sizeof(float)))
            << "bf16 input " << ToString(GetParam()) << " m=" << m << " k=" << k << " n=" << n;
      }
    }
  }
}

// Large enough that the pool splits the rows into tasks (the small shapes above run inline).
TEST_P(PackedMatmulTest, EqualsRowMajorAcrossTasks) {
  ThreadPool pool(3);
  const int64_t k = 1001, n = 1000;
  const std::vector<Bf16> w = RandomWeights(n * k, 3);
  const PackedBf16Matrix packed = PackedBf16Matrix::Pack(w.data(), n, k);
  for (int64_t m : {1, 2, 3, 8, 9, 10, 11, 12, 13, 20, 24, 70}) {
    const std::vector<float> x = RandomActivations(m * k, static_cast<uint32_t>(m));
    std::vector<float> row_major(m * n), from_packed(m * n);
    MatmulBf16(x.data(), m, k, w.data(), n, row_major.data(), n, pool);
    MatmulBf16(x.data(), m, packed, from_packed.data(), n, pool);
    ASSERT_EQ(0,
              std::memcmp(row_major.data(), from_packed.data(), row_major.size() * sizeof(float)))
        << ToString(GetParam()) << " m=" << m;
  }
}

TEST_P(PackedMatmulTest, ExpertFfnEqualsRowMajor) {
  ThreadPool pool(2);
  const int64_t hidden = 67, width = 45;
  const std::vector<Bf16> block = RandomWeights(3 * hidden * width, 11);
  const Bf16* gate_up = block.data();
  const Bf16* down = block.data() + 2 * width * hidden;
  const PackedBf16Matrix packed_gate_up = PackedBf16Matrix::Pack(gate_up, 2 * width, hidden);
  const PackedBf16Matrix packed_down = PackedBf16Matrix::Pack(down, hidden, width);
  ExpertFfnScratch scratch;
  for (int64_t tokens : {1, 4, 9, 20}) {
    const std::vector<float> x = RandomActivations(tokens * hidden, static_cast<uint32_t>(tokens));
    std::vector<float> row_major(tokens * hidden), from_packed(tokens * hidden);
    ExpertFfn(x.data(), tokens, hidden, width, gate_up, down, row_major.data(), pool, scratch);
    ExpertFfn(x.data(), tokens, packed_gate_up, packed_down, from_packed.data(), pool, scratch);
    ASSERT_EQ(0,
              std::memcmp(row_major.data(), from_packed.data(), row_major.size() * sizeof(float)))
        << ToString(GetParam()) << " tokens=" << tokens;
  }
}

// The fp32-FMA paths (AVX2, AVX-512F) add each exact bf16 product to one fp32 accumulator in k
// order, which is what the scalar loop does: the same bits, decode tiles, prefill k blocks
// (k = 1031: 516 pairs, 3 blocks of up to 256) and odd shapes alike.
TEST_P(PackedMatmulTest, FmaPathEqualsScalarBitForBit) {
  if (GetParam() == Isa::kScalar || GetParam() == Isa::kAvx512Bf16) {
    GTEST_SKIP() << ToString(GetParam())
                 << " multiplies pairs with its own instruction (not the fp32-FMA family)";
  }
  ThreadPool pool(2);
  uint32_t seed = 40;
  for (int64_t k : {7, 33, 1031}) {
    for (int64_t n : {5, 70, 300}) {
      const std::vector<Bf16> w = RandomWeights(n * k, seed++);
      const PackedBf16Matrix packed = PackedBf16Matrix::Pack(w.data(), n, k);
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 300}) {
        const std::vector<float> x = RandomActivations(m * k, seed++);
        std::vector<float> fma(m * n), scalar(m * n);
        MatmulBf16(x.data(), m, packed, fma.data(), n, pool);
        SetActiveIsa(Isa::kScalar);
        MatmulBf16(x.data(), m, packed, scalar.data(), n, pool);
        SetActiveIsa(GetParam());
        ASSERT_EQ(0, std::memcmp(fma.data(), scalar.data(), fma.size() * sizeof(float)))
            << ToString(GetParam()) << " m=" << m << " k=" << k << " n=" << n;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, PackedMatmulTest, ::testing::ValuesIn(AllIsas()),
                         [](const auto& info) { return ToString(info.param); });

}  // namespace
}  // namespace moelab::kernels
