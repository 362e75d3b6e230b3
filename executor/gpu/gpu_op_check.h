#pragma once

#include <cstdint>
#include <vector>

#include "kernels/packed_matrix.h"
#include "kernels/quantized_matrix.h"

// Each op of the GPU backend on its own, on host data, on GPU 0 (CUDA-free header; implemented in
// gpu_op_check.cc in CUDA builds, refused in gpu_none.cc): what tests/executor/gpu_ops_test.cc
// compares with the CPU's ops, op by op (llama.cpp's test-backend-ops is the model). Every call
// throws moelab::Error without a GPU or a CUDA build.
namespace moelab::executor::gpu_check {

// y [rows][w.rows()] = bf16(x) . w^T through the backend's cuBLAS GEMM in blocks of kGpuGemmRows.
std::vector<float> Matmul(const std::vector<float>& x, int64_t rows,
                          const kernels::PackedBf16Matrix& w);
// Each row's RMSNorm times `weight`, rounded to bf16 (returned as float).
std::vector<float> RmsNormToBf16(const std::vector<float>& x, int64_t rows, int64_t width,
                                 const std::vector<float>& weight, float eps);
// Row-wise softmax.
std::vector<float> Softmax(const std::vector<float>& x, int64_t rows, int64_t width);
// [rows][2 width] (gate | up) -> bf16(silu(gate) * up) [rows][width] (returned as float).
std::vector<float> SwiGlu(const std::vector<float>& gate_up, int64_t rows, int64_t width);
// One token's grouped-query attention: q [heads][head_dim] at `position` over keys and values
// [position + 1][kv_heads * head_dim], positions past the sliding window (0: none) unseen; the
// output rounded to bf16 [heads][head_dim] (returned as float).
std::vector<float> Attention(const std::vector<float>& q, const std::vector<float>& keys,
                             const std::vector<float>& values, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, int64_t position, int64_t sliding_window);

// The quantized experts' matmul: x's rows [tokens][w.cols()] RMS-normed (weight 1, eps 1e-5) and
// quantized on the device, then y [i][w.rows()] = w . x[token_rows[i]] for each i.
std::vector<float> QuantizedMatmul(const std::vector<float>& x, int64_t tokens,
                                   const std::vector<int32_t>& token_rows,
                                   const kernels::QuantizedMatrix& w);

}  // namespace moelab::executor::gpu_check
