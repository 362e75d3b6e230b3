#pragma once

#include <cstddef>
#include <cstdint>

namespace moelab::bench {

// Probes of this machine's own limits, run in the same binary as the kernels they judge.

// Sums `bytes` of `data` (64-byte aligned) with wide loads; returns the sum so the compiler keeps
// the loads. AVX-512 when available, else portable.
float ReadStream(const char* data, size_t bytes);

// `iterations` x 12 independent vdpbf16ps (64 FLOPs each) on registers; returns a value that
// depends on all of them. Only call when the CPU has AVX512-BF16.
float Bf16DotLoop(int64_t iterations);

}  // namespace moelab::bench
