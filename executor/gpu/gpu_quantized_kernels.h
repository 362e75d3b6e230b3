#pragma once

// Block-quantized routed experts on the GPU (gpu_quantized_kernels.cu): the CPU's q8_0 / q4_0
// records (kernels/quantized_matrix.h) uploaded as stored, multiplied by activations quantized per
// token and run of 32 exactly as the CPU quantizes them (kernels/quantized_activations.h), with
// integer dot products (dp4a) per run and one fp32 scale product per run, as llama.cpp's mmvq.
// Each token's result depends on its own activations only: no batch changes a token's bits.
#include <cstdint>

#include "executor/gpu/gpu_kernels.h"

namespace moelab::executor::gpu {

// A quantized [rows][cols] weight on the device in QuantizedMatrix's layout: groups of 8 rows,
// each a run of records (8 fp16 scales, then the quants) along k.
struct QuantizedWeightsView {
  const uint8_t* records = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  bool q4_0 = false;  // else q8_0
};

// Activations of `rows` tokens quantized per run of 32: quants [rows][runs * 32], scales
// [rows][runs], runs = ceil(width / 32) (QuantizedRuns).
int64_t QuantizedRuns(int64_t width);

// RMSNorm of x's rows times `weight` (fp32, not rounded to bf16: the CPU's experts quantize the
// fp32 norm), quantized.
void RmsNormQuantize(const float* x, int64_t ld_x, int64_t rows, int64_t width, const float* weight,
                     float eps, int8_t* quants, float* scales, Stream stream);

// silu(gate) * up of gate_up's rows [gate | up] (fp32), quantized.
void SwiGluQuantize(const float* gate_up, int64_t ld_gate_up, int64_t rows, int64_t width,
                    int8_t* quants, float* scales, Stream stream);

// y[i][n] = sum over k of w[n][k] * x[row(i)][k] for i < rows, row(i) = token_rows[i] when given,
// else i; x as quantized by the two calls above (runs of w.cols); y fp32 rows ld_y apart.
void QuantizedMatmul(const QuantizedWeightsView& w, const int8_t* quants, const float* scales,
                     const int32_t* token_rows, int64_t rows, float* y, int64_t ld_y,
                     Stream stream);

}  // namespace moelab::executor::gpu
