// Compiled with AVX-512 flags; called only on CPUs that have them (machine_limits.cc checks).
#include <immintrin.h>

#include "profiler/machine_limits.h"

namespace moelab::profiler {

float ReadStreamAvx512(const char* data, size_t bytes) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  size_t i = 0;
  for (; i + 256 <= bytes; i += 256) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(reinterpret_cast<const float*>(data + i)));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(reinterpret_cast<const float*>(data + i + 64)));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(reinterpret_cast<const float*>(data + i + 128)));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(reinterpret_cast<const float*>(data + i + 192)));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

float Bf16DotLoop(int64_t iterations) {
  __m512 acc[12];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  __m512bh x = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80));
  const __m512bh y = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3c00));
  for (int64_t i = 0; i < iterations; ++i) {
    // Unrolled whatever the optimization level, so the 12 chains live in registers.
#pragma GCC unroll 12
    for (__m512& a : acc) a = _mm512_dpbf16_ps(a, x, y);
    __asm__ volatile("" : "+v"(x));  // keep the loop from being folded
  }
  __m512 sum = acc[0];
  for (int j = 1; j < 12; ++j) sum = _mm512_add_ps(sum, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0];
}

}  // namespace moelab::profiler
