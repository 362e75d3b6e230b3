// Compiled with AVX-512 F/BW/VL/VNNI; called only on CPUs that have them (the benchmark checks
// kernels::ActiveQuantizedKernel()).
#include <immintrin.h>

#include "profiler/machine_limits.h"

namespace moelab::profiler {

float Int8DotLoopVnni(int64_t iterations) {
  __m256i acc[12];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  __m256i x = _mm256_set1_epi8(3);
  const __m256i y = _mm256_set1_epi8(-2);
  for (int64_t i = 0; i < iterations; ++i) {
    // The quantized kernel's instruction (vpdpbusd on 256-bit vectors, 32 multiply-adds), in 12
    // independent chains: more than its latency x throughput.
#pragma GCC unroll 12
    for (__m256i& a : acc) a = _mm256_dpbusd_epi32(a, x, y);
    __asm__ volatile("" : "+v"(x));  // keep the loop from being folded
  }
  __m256i sum = acc[0];
  for (int j = 1; j < 12; ++j) sum = _mm256_add_epi32(sum, acc[j]);
  return static_cast<float>(_mm256_extract_epi32(sum, 0));
}

}  // namespace moelab::profiler
