#include "bench/machine_limits.h"

#include "kernels/cpu_features.h"

namespace moelab::bench {

float ReadStreamAvx512(const char* data, size_t bytes);

float ReadStream(const char* data, size_t bytes) {
  if (ActiveIsa() == Isa::kAvx512Bf16) return ReadStreamAvx512(data, bytes);
  float a[8] = {};
  const float* values = reinterpret_cast<const float*>(data);
  const size_t count = bytes / sizeof(float);
  for (size_t i = 0; i + 8 <= count; i += 8) {
    for (int j = 0; j < 8; ++j) a[j] += values[i + j];
  }
  float sum = 0;
  for (float v : a) sum += v;
  return sum;
}

}  // namespace moelab::bench
