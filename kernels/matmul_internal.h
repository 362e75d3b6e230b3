#pragma once

// Per-instruction-set row kernels behind MatmulBf16; each lives in its own translation unit
// compiled with that ISA's flags, so the portable code never executes an unsupported instruction.

#include <cstdint>

#include "kernels/bf16.h"

namespace moelab::kernels_internal {

// Computes y rows [0, m) x columns [n_begin, n_end) of y = x w^T. `scratch` is per-thread memory
// of at least ScratchBytes(m) bytes, 64-byte aligned.
using MatmulRowsFn = void (*)(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                              int64_t n_end, float* y, int64_t ldy, void* scratch);

void MatmulRowsScalar(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                      int64_t n_end, float* y, int64_t ldy, void* scratch);
void MatmulRowsAvx2(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                    int64_t n_end, float* y, int64_t ldy, void* scratch);
void MatmulRowsAvx512Bf16(const Bf16* x, int64_t m, int64_t k, const Bf16* w, int64_t n_begin,
                          int64_t n_end, float* y, int64_t ldy, void* scratch);

// Output rows per parallel task and scratch size, per ISA and token count.
int64_t RowsPerTask(int64_t m, int64_t n, int threads);
int64_t ScratchBytes(int64_t m);
int64_t Avx512ScratchBytes();  // lanes of the k-blocked path
// Round to nearest even with vcvtne2ps2bf16 (same as FloatToBf16 for normal and zero values).
void ConvertToBf16Avx512(const float* in, int64_t count, Bf16* out);

}  // namespace moelab::kernels_internal
