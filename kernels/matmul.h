#pragma once

#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/packed_matrix.h"
#include "kernels/quantized_activations.h"
#include "kernels/quantized_matrix.h"
#include "kernels/thread_pool.h"

namespace moelab::kernels {

// y[i][j] = sum_k bf16(x[i][k]) * w[j][k]   for i < m tokens, j < n outputs.
// x: m x k fp32 activations (rounded to bf16 for the products, as llama.cpp's vec_dot does);
// w: n x k bf16 weights, row-major as Hugging Face stores a Linear layer ([out, in]);
// y: m x n fp32, row stride ldy (>= n). Products are exact in fp32; accumulation is fp32.
//
// Determinism: on a given instruction set, y[i][j] depends only on row i of x and row j of w,
// never on m, n, the blocking or the thread count, so a token's result is the same whether it is
// decoded alone or verified in a batch (speculative decoding relies on this).
void MatmulBf16(const float* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                int64_t ldy, ThreadPool& pool);

// Same with x already in bf16 (m x k, row stride k).
void MatmulBf16Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n, float* y,
                    int64_t ldy, ThreadPool& pool);

// Same with the weights packed (w.rows() = n outputs, w.cols() = k): the layout the executor keeps.
// Bit-identical to the row-major call on the same instruction set; on AVX512-BF16 decode reads each
// 16-row pair vector with one load instead of transposing row-major weights in registers.
void MatmulBf16(const float* x, int64_t m, const PackedBf16Matrix& w, float* y, int64_t ldy,
                ThreadPool& pool);
void MatmulBf16Bf16(const Bf16* x, int64_t m, const PackedBf16Matrix& w, float* y, int64_t ldy,
                    ThreadPool& pool);

// Same on block-quantized weights (w.rows() = n outputs, w.cols() = k) as an integer dot product:
// x quantized per block of 32 (QuantizeActivations), exact int32 block sums, each output adding
// fma(d_w * d_x, sum, acc) in block order. Scalar and AVX2 (also used on the AVX-512 ISAs) give the
// same bits, and a token's result never depends on the batch.
void MatmulQuantized(const float* x, int64_t m, const QuantizedMatrix& w, float* y, int64_t ldy,
                     ThreadPool& pool);
// x (m x k fp32) quantized per block of 32 as MatmulQuantized does (same bits on every ISA).
void QuantizeActivations(const float* x, int64_t m, int64_t k, QuantizedActivations& out,
                         ThreadPool& pool);

// Size and touch the calling thread's scratch that MatmulBf16 (bf16 weights) or MatmulQuantized
// (block-quantized weights) on up to m tokens of k columns uses on the active instruction set, so
// a later call does not take the OS's first-touch page faults inside its time (the scratch only
// grows; calls on fewer tokens or columns reuse it).
void ReserveBf16MatmulScratch(int64_t m, int64_t k);
void ReserveQuantizedMatmulScratch(int64_t m, int64_t k);

// Rounds fp32 values to bf16 (nearest even).
void ConvertToBf16(const float* in, int64_t count, Bf16* out);

}  // namespace moelab::kernels
