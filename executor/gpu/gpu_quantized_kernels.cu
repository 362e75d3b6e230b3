// Quantized expert kernels (gpu_quantized_kernels.h). Reductions are fixed trees: a token's result
// depends on its own data only.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "base/error.h"

#include "device/cuda_check.h"
#include "executor/gpu/gpu_quantized_kernels.h"

namespace moelab::executor::gpu {
namespace {

constexpr int kWarp = 32;
constexpr int kRun = 32;  // elements per quantization run (kernels::kQuantBlock)
constexpr int kQuantizeThreads = 256;
// QuantizedMatmulKernel: a block per (group of 8 weight rows, chunk of kTokensPerBlock tokens);
// its kMatmulWarps warps take consecutive quarters of the runs along k, so a narrow matrix still
// has enough warps streaming, and the quarters are added in warp order.
constexpr int kGroupRows = 8;
constexpr int kTokensPerBlock = 8;
constexpr int kMatmulWarps = 4;
constexpr int kRunsInFlight = 8;

cudaStream_t AsStream(Stream stream) { return static_cast<cudaStream_t>(stream); }

__device__ float WarpMaxAbs(float value) {
  value = fabsf(value);
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// One run of 32 values, one per lane (0 past the row's width), quantized as
// kernels::QuantizeActivationBlock does: d = max|v| / 127 (NaN when a value is not finite),
// q = nearest-even(v / d) clamped to [-127, 127], 0 where d is 0 or NaN.
__device__ void QuantizeRun(float value, bool in_row, int8_t* quants, float* scale) {
  const int lane = threadIdx.x % kWarp;
  const bool finite = __all_sync(0xffffffffu, !in_row || isfinite(value));
  const float largest = WarpMaxAbs(in_row ? value : 0.0f);
  const float d = finite ? largest / 127.0f : __int_as_float(0x7fc00000);
  const float q =
      in_row && finite && d != 0.0f ? fminf(fmaxf(rintf(value / d), -127.0f), 127.0f) : 0.0f;
  quants[lane] = static_cast<int8_t>(q);
  if (lane == 0) *scale = d;
}

__global__ void RmsNormQuantizeKernel(const float* x, int64_t ld_x, int64_t width,
                                      const float* weight, float eps, int8_t* quants,
                                      float* scales) {
  __shared__ double partial[kQuantizeThreads / kWarp];
  const int64_t r = blockIdx.x;
  const float* row = x + r * ld_x;
  double sum_squares = 0;
  for (int64_t j = threadIdx.x; j < width; j += kQuantizeThreads)
    sum_squares += static_cast<double>(row[j]) * row[j];
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    sum_squares += __shfl_xor_sync(0xffffffffu, sum_squares, offset);
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (lane == 0) partial[warp] = sum_squares;
  __syncthreads();
  double total = 0;
  for (int w = 0; w < kQuantizeThreads / kWarp; ++w) total += partial[w];
  const float scale = static_cast<float>(rsqrt(total / static_cast<double>(width) + eps));
  const int64_t runs = (width + kRun - 1) / kRun;
  for (int64_t run = warp; run < runs; run += kQuantizeThreads / kWarp) {
    const int64_t j = run * kRun + lane;
    const bool in_row = j < width;
    const float value = in_row ? row[j] * scale * weight[j] : 0.0f;
    QuantizeRun(value, in_row, quants + (r * runs + run) * kRun, scales + r * runs + run);
  }
}

__global__ void SwiGluQuantizeKernel(const float* gate_up, int64_t ld_gate_up, int64_t width,
                                     int8_t* quants, float* scales) {
  const int64_t r = blockIdx.x;
  const float* row = gate_up + r * ld_gate_up;
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int64_t runs = (width + kRun - 1) / kRun;
  for (int64_t run = warp; run < runs; run += kQuantizeThreads / kWarp) {
    const int64_t j = run * kRun + lane;
    const bool in_row = j < width;
    float value = 0.0f;
    if (in_row) {
      const float gate = row[j];
      value = gate / (1.0f + expf(-gate)) * row[width + j];
    }
    QuantizeRun(value, in_row, quants + (r * runs + run) * kRun, scales + r * runs + run);
  }
}

// A lane's share of a record: q8_0 (256 bytes of quants) gives lane L the dwords 2L and 2L + 1,
// rows 2 (L % 4) and 2 (L % 4) + 1, elements 4 (L / 4) .. + 3 of the run; q4_0 (128 bytes) gives
// it dword L, row L % 8, elements 4 (L / 8) .. + 3 (low nibbles) and 16 + those (high nibbles).
template <bool kQ4>
__global__ void QuantizedMatmulKernel(const uint8_t* records, int64_t rows, int64_t runs,
                                      const int8_t* quants, const float* scales,
                                      const int32_t* token_rows, int64_t tokens, float* y,
                                      int64_t ld_y) {
  constexpr int kRowsPerLane = kQ4 ? 1 : 2;
  constexpr int64_t kRecordBytes = 16 + (kQ4 ? 128 : 256);
  __shared__ float sums[kMatmulWarps][kGroupRows][kTokensPerBlock];
  // Token chunks vary fastest, so the blocks that read one group of weight rows run together and
  // all but the first find it in L2.
  const int64_t group = blockIdx.y;
  const int64_t token_begin = static_cast<int64_t>(blockIdx.x) * kTokensPerBlock;
  const int chunk =
      static_cast<int>(min(static_cast<int64_t>(kTokensPerBlock), tokens - token_begin));
  const int warp = threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  const int first_row = kQ4 ? lane % 8 : 2 * (lane % 4);
  const int element = kQ4 ? 4 * (lane / 8) : 4 * (lane / 4);
  int32_t x_row[kTokensPerBlock];  // the tokens' rows of quants and scales
  for (int t = 0; t < kTokensPerBlock; ++t) {
    const int64_t i = token_begin + min(t, chunk - 1);
    x_row[t] = token_rows ? token_rows[i] : static_cast<int32_t>(i);
  }
  const int8_t* lane_quants = quants + element;
  float accumulator[kRowsPerLane][kTokensPerBlock] = {};
  const uint8_t* group_records = records + group * runs * kRecordBytes;
  const int64_t run_begin = runs * warp / kMatmulWarps;
  const int64_t run_end = runs * (warp + 1) / kMatmulWarps;
  // kRunsInFlight records' words and scales are loaded before any is used, so each warp keeps
  // that many loads outstanding (one at a time left the kernel at an eighth of the bandwidth).
  for (int64_t run0 = run_begin; run0 < run_end; run0 += kRunsInFlight) {
    int packed[kRunsInFlight][kRowsPerLane];
    float weight_scale[kRunsInFlight][kRowsPerLane];
#pragma unroll
    for (int u = 0; u < kRunsInFlight; ++u) {
      const int64_t run = min(run0 + u, run_end - 1);
      const uint8_t* record = group_records + run * kRecordBytes;
      const __half* scales_of_rows = reinterpret_cast<const __half*>(record);
      if constexpr (kQ4) {
        packed[u][0] = *reinterpret_cast<const int*>(record + 16 + 4 * lane);
      } else {
        const int2 words = *reinterpret_cast<const int2*>(record + 16 + 8 * lane);
        packed[u][0] = words.x;
        packed[u][kRowsPerLane - 1] = words.y;
      }
#pragma unroll
      for (int k = 0; k < kRowsPerLane; ++k)
        weight_scale[u][k] = __half2float(scales_of_rows[first_row + k]);
    }
#pragma unroll
    for (int u = 0; u < kRunsInFlight; ++u) {
      const int64_t run = run0 + u;
      if (run >= run_end) break;
#pragma unroll
      for (int t = 0; t < kTokensPerBlock; ++t) {
        if (t >= chunk) break;
        const float x_scale = scales[static_cast<int64_t>(x_row[t]) * runs + run];
        const int8_t* x = lane_quants + (static_cast<int64_t>(x_row[t]) * runs + run) * kRun;
        if constexpr (kQ4) {
          const int low = packed[u][0] & 0x0f0f0f0f;
          const int high = (packed[u][0] >> 4) & 0x0f0f0f0f;
          const int x_low = *reinterpret_cast<const int*>(x);
          const int x_high = *reinterpret_cast<const int*>(x + 16);
          // (q - 8) . x = q . x - 8 sum(x)
          const int dot = __dp4a(low, x_low, 0) + __dp4a(high, x_high, 0) -
                          8 * (__dp4a(0x01010101, x_low, 0) + __dp4a(0x01010101, x_high, 0));
          accumulator[0][t] += weight_scale[u][0] * x_scale * static_cast<float>(dot);
        } else {
          const int xq = *reinterpret_cast<const int*>(x);
#pragma unroll
          for (int k = 0; k < kRowsPerLane; ++k) {
            accumulator[k][t] +=
                weight_scale[u][k] * x_scale * static_cast<float>(__dp4a(packed[u][k], xq, 0));
          }
        }
      }
    }
  }
  // Lanes holding the same rows differ in the bits above the row bits: xor over those.
  constexpr int kFirstOffset = kQ4 ? 8 : 4;
#pragma unroll
  for (int k = 0; k < kRowsPerLane; ++k) {
#pragma unroll
    for (int t = 0; t < kTokensPerBlock; ++t) {
      float value = accumulator[k][t];
      for (int offset = kFirstOffset; offset < kWarp; offset *= 2)
        value += __shfl_xor_sync(0xffffffffu, value, offset);
      accumulator[k][t] = value;
    }
  }
  if (lane < kFirstOffset) {
    for (int k = 0; k < kRowsPerLane; ++k) {
      for (int t = 0; t < kTokensPerBlock; ++t) sums[warp][first_row + k][t] = accumulator[k][t];
    }
  }
  __syncthreads();
  if (threadIdx.x < kGroupRows * kTokensPerBlock) {
    const int row = threadIdx.x / kTokensPerBlock;
    const int t = threadIdx.x % kTokensPerBlock;
    const int64_t n = group * kGroupRows + row;
    if (t < chunk && n < rows) {
      float total = 0;
      for (int w = 0; w < kMatmulWarps; ++w) total += sums[w][row][t];
      y[(token_begin + t) * ld_y + n] = total;
    }
  }
}

}  // namespace

int64_t QuantizedRuns(int64_t width) { return (width + kRun - 1) / kRun; }

void RmsNormQuantize(const float* x, int64_t ld_x, int64_t rows, int64_t width, const float* weight,
                     float eps, int8_t* quants, float* scales, Stream stream) {
  if (rows == 0) return;
  RmsNormQuantizeKernel<<<rows, kQuantizeThreads, 0, AsStream(stream)>>>(x, ld_x, width, weight,
                                                                         eps, quants, scales);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void SwiGluQuantize(const float* gate_up, int64_t ld_gate_up, int64_t rows, int64_t width,
                    int8_t* quants, float* scales, Stream stream) {
  if (rows == 0) return;
  SwiGluQuantizeKernel<<<rows, kQuantizeThreads, 0, AsStream(stream)>>>(gate_up, ld_gate_up, width,
                                                                        quants, scales);
  MOELAB_CUDA_CHECK_LAUNCH();
}

void QuantizedMatmul(const QuantizedWeightsView& w, const int8_t* quants, const float* scales,
                     const int32_t* token_rows, int64_t rows, float* y, int64_t ld_y,
                     Stream stream) {
  if (rows == 0) return;
  const int64_t groups = (w.rows + kGroupRows - 1) / kGroupRows;
  if (groups > 65535)
    throw base::Error("quantized matmul: " + std::to_string(w.rows) +
                      " weight rows is above the kernel's 65535 groups of 8");
  const dim3 grid(static_cast<unsigned>((rows + kTokensPerBlock - 1) / kTokensPerBlock),
                  static_cast<unsigned>(groups));
  const int64_t runs = QuantizedRuns(w.cols);
  if (w.q4_0) {
    QuantizedMatmulKernel<true><<<grid, kMatmulWarps * kWarp, 0, AsStream(stream)>>>(
        w.records, w.rows, runs, quants, scales, token_rows, rows, y, ld_y);
  } else {
    QuantizedMatmulKernel<false><<<grid, kMatmulWarps * kWarp, 0, AsStream(stream)>>>(
        w.records, w.rows, runs, quants, scales, token_rows, rows, y, ld_y);
  }
  MOELAB_CUDA_CHECK_LAUNCH();
}

}  // namespace moelab::executor::gpu
