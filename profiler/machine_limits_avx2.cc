// Compiled with -mavx2 -mfma; called only on CPUs that have them (machine_limits.cc checks).
#include <immintrin.h>

#include "profiler/machine_limits.h"

namespace moelab::profiler {

float ReadStreamAvx2(const char* data, size_t bytes) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(reinterpret_cast<const float*>(data + i)));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(reinterpret_cast<const float*>(data + i + 32)));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(reinterpret_cast<const float*>(data + i + 64)));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(reinterpret_cast<const float*>(data + i + 96)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

float Fp32FmaLoop(int64_t iterations) {
  __m256 acc[12];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  __m256 x = _mm256_set1_ps(1.0f);
  const __m256 y = _mm256_set1_ps(0.5f);
  for (int64_t i = 0; i < iterations; ++i) {
    // 12 chains: more than latency x throughput (4 x 2 on Zen 3, 4 x 2 on Skylake), so the FMA
    // units, not the dependencies, set the pace.
#pragma GCC unroll 12
    for (__m256& a : acc) a = _mm256_fmadd_ps(x, y, a);
    __asm__ volatile("" : "+x"(x));  // keep the loop from being folded
  }
  __m256 sum = acc[0];
  for (int j = 1; j < 12; ++j) sum = _mm256_add_ps(sum, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, sum);
  return lanes[0];
}

float Int8DotLoopAvx2(int64_t iterations) {
  __m256i acc[12];
  for (__m256i& a : acc) a = _mm256_setzero_si256();
  __m256i x = _mm256_set1_epi8(3);
  const __m256i y = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < iterations; ++i) {
    // The AVX2 quantized kernel's sequence for 32 multiply-adds: vpmaddubsw (byte pairs to int16),
    // vpmaddwd with ones (to int32), vpaddd; 12 independent chains.
#pragma GCC unroll 12
    for (__m256i& a : acc)
      a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), ones));
    __asm__ volatile("" : "+x"(x));  // keep the loop from being folded
  }
  __m256i sum = acc[0];
  for (int j = 1; j < 12; ++j) sum = _mm256_add_epi32(sum, acc[j]);
  return static_cast<float>(_mm256_extract_epi32(sum, 0));
}

}  // namespace moelab::profiler
