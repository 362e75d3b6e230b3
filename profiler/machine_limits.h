#pragma once

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "kernels/thread_pool.h"

namespace moelab::profiler {

// Probes of this machine's own limits: the denominators of every "% of DRAM bandwidth" and
// "% of peak" figure (bench/) and of a profile's calibration of the analytic roofline (fit/).

// Sums `bytes` of `data` (64-byte aligned) with wide loads; returns the sum so the compiler keeps
// the loads. AVX-512 or AVX2 when available, else portable.
float ReadStream(const char* data, size_t bytes);

// `iterations` x 12 independent vdpbf16ps (64 FLOPs each) on registers; returns a value that
// depends on all of them. Only call when the CPU has AVX512-BF16.
float Bf16DotLoop(int64_t iterations);

// FLOPs one Bf16DotLoop iteration performs.
inline constexpr double kBf16DotLoopFlopsPerIteration = 12.0 * 64.0;

// `iterations` x 12 independent 256-bit fp32 FMAs (16 FLOPs each) on registers: the fp32 peak of
// the AVX2 kernels. Only call when the CPU has AVX2 and FMA.
float Fp32FmaLoop(int64_t iterations);
inline constexpr double kFp32FmaLoopFlopsPerIteration = 12.0 * 16.0;

// `iterations` x 12 independent 256-bit int8 dot products (32 byte multiply-adds each, counted as
// 64 operations like a FLOP pair) on registers, with the quantized kernel's instructions: the
// integer peak the q8_0 / q4_0 kernels are judged against. Vnni: vpdpbusd (only call when the CPU
// has AVX512-VNNI and VL); Avx2: vpmaddubsw + vpmaddwd + vpaddd (AVX2).
float Int8DotLoopVnni(int64_t iterations);
float Int8DotLoopAvx2(int64_t iterations);
inline constexpr double kInt8DotLoopOpsPerIteration = 12.0 * 64.0;

// machine.limits of a profile: {"dram_read_bytes_per_s", "peak_flops": {"bf16": ...} (only on
// CPUs with AVX512-BF16), "fp32": ... (CPUs with AVX2+FMA)}, "threads", "method"}: the best of
// `repetitions` timed passes of every pool thread streaming its share of a `buffer_bytes` buffer
// (>= 2 x L3 so it comes from DRAM), and of every thread running Bf16DotLoop / Fp32FmaLoop. Best,
// not median: a limit is what the machine can do.
nlohmann::json MeasureMachineLimits(kernels::ThreadPool& pool, size_t buffer_bytes,
                                    int repetitions);

}  // namespace moelab::profiler
