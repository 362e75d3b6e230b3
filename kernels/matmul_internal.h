#pragma once

// Per-instruction-set row kernels behind MatmulBf16; each lives in its own translation unit
// compiled with that ISA's flags, so the portable code never executes an unsupported instruction.

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/quantized_activations.h"
#include "kernels/quantized_matrix.h"

namespace moelab::kernels::internal {

// Computes y rows [0, m) x columns [n_begin, n_end) of y = x w^T; x: m x k bf16, row-major.
void MatmulRowsScalar(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                      int64_t n_end, float* y, int64_t ldy);

// fp32-FMA ISAs (kernels/matmul_row_lanes.h) on PackedBf16Matrix storage: x is m x k fp32 values
// already rounded to bf16 (RoundToBf16Floats); wp is group 0 of the matrix, n_begin a multiple
// of 16.
using MatmulPackedRowsFn = void (*)(const float* x, int64_t m, int64_t k, const Bf16* wp,
                                    int64_t n_begin, int64_t n_end, float* y, int64_t ldy);
void MatmulPackedRowsAvx2(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy);
void MatmulPackedRowsAvx512F(const float* x, int64_t m, int64_t k, const Bf16* wp, int64_t n_begin,
                             int64_t n_end, float* y, int64_t ldy);
// Quantized weights (kernels/quantized_matrix.h) times activations quantized per block of 32
// (kernels/quantized_activations.h, all x.tokens tokens); rows [n_begin, n_end), n_begin a multiple
// of 8. Per output: exact int32 block sums, then fma(d_w * d_x, sum, acc) in block order, so the
// two give the same bits.
void MatmulQuantizedRowsScalar(const QuantizedActivations& x, const QuantizedMatrix& w,
                               int64_t n_begin, int64_t n_end, float* y, int64_t ldy);
void MatmulQuantizedRowsAvx2(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy);
void MatmulQuantizedRowsVnni(const QuantizedActivations& x, const QuantizedMatrix& w,
                             int64_t n_begin, int64_t n_end, float* y, int64_t ldy);
// Bit-identical to QuantizeActivationTokensScalar.
void QuantizeActivationTokensAvx2(const float* x, int64_t k, int64_t t_begin, int64_t t_end,
                                  QuantizedActivations& out);
// out[i] = Bf16ToFloat(FloatToBf16(in[i])), 8 at a time.
void RoundToBf16FloatsAvx2(const float* in, int64_t count, float* out);

// Chunked decode (9 tokens up to a per-ISA limit): decode tiles of at most 8 tokens over row panels
// of about kChunkedPanelBytes of weights; the first chunk streams a panel from DRAM, the next ones
// read it from L2. Decode and prefill tiles add the same products in the same order, so a token's
// bits do not depend on the path. Where it pays was measured (bench/kernels_bench ExpertFfn on the
// default expert, a Xeon with AVX512-BF16, ms at 9 / 12 / 16 / 24 tokens, prefill tiles ->
// chunked): AVX512-BF16 3.43 / 3.79 / 4.05 / 7.27 -> 1.97 / 2.33 / 2.91 / 3.97 (its prefill
// lanes are 16 tokens and feed each broadcast weight to one vector); AVX2 3.06 / 3.94 / 4.70 /
// 6.03 -> 2.82 / 3.31 / 4.09 / 6.19; AVX-512F 1.57 / 1.97 / 2.30 / 3.23 -> 1.63 / 2.03 / 2.52 /
// 3.56 (its 12-token prefill tile is already good: not chunked).
constexpr int64_t kAvx512Bf16ChunkedDecodeTokens = 24;
// On packed weights one decode tile takes up to this many tokens (matmul_avx512bf16.cc).
constexpr int64_t kAvx512Bf16PackedDecodeTokens = 12;
// Tokens per vector of the AVX512-BF16 prefill tile (one 512-bit vector of fp32 results per row).
constexpr int64_t kAvx512Bf16PrefillTokenLanes = 16;
constexpr int64_t kChunkedPanelBytes = 256 * 1024;
inline int64_t ChunkedPanelRows(int64_t k) {
  const int64_t rows = kChunkedPanelBytes / (2 * k) / 16 * 16;
  return rows > 16 ? rows : 16;
}
// Calls chunk(first_token, tokens, row_begin, row_end) for every decode chunk, panel by panel.
template <typename Chunk>
void ForChunkedDecode(int64_t m, int64_t k, int64_t n_begin, int64_t n_end, int64_t chunk_tokens,
                      const Chunk& chunk) {
  const int64_t panel = ChunkedPanelRows(k);
  for (int64_t row = n_begin; row < n_end; row += panel) {
    const int64_t row_end = row + panel < n_end ? row + panel : n_end;
    for (int64_t t = 0; t < m; t += chunk_tokens)
      chunk(t, m - t < chunk_tokens ? m - t : chunk_tokens, row, row_end);
  }
}

// AVX512-BF16. Up to kAvx512Bf16ChunkedDecodeTokens tokens the kernel reads x (m x k bf16,
// row-major); above it, x_pairs: the tokens packed by PackTokenPairsAvx512, 64-byte aligned,
// TokenPairsCount(m, k) dwords.
constexpr int64_t kDecodeTokens = 8;
void MatmulRowsAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m, int64_t k,
                          const Bf16* w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy);

// The same on PackedBf16Matrix storage: wp is group 0 of the matrix, n_begin a multiple of 16.
void MatmulPackedRowsAvx512Bf16(const Bf16* x, const int32_t* x_pairs, int64_t m, int64_t k,
                                const Bf16* wp, int64_t n_begin, int64_t n_end, float* y,
                                int64_t ldy);

// Pair-major packing of `tokens` <= 16 tokens (one block): dword p * 16 + t holds elements 2p and
// 2p + 1 of token t (zero past k and past `tokens`). Block b of a batch starts at dword
// b * 16 * ceil(k / 2).
inline int64_t TokenPairsCount(int64_t m, int64_t k) { return (m + 15) / 16 * 16 * ((k + 1) / 2); }
void PackTokenPairsAvx512(const float* x, int64_t tokens, int64_t k,
                          int32_t* out);  // rounds to bf16
void PackTokenPairsAvx512(const Bf16* x, int64_t tokens, int64_t k, int32_t* out);

// Output rows per parallel task.
int64_t RowsPerTask(int64_t n, int threads);
// Round to nearest even with vcvtne2ps2bf16 (same as FloatToBf16 for normal and zero values).
void ConvertToBf16Avx512(const float* in, int64_t count, Bf16* out);

}  // namespace moelab::kernels::internal
