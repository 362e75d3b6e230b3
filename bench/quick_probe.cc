#include <chrono>
#include <cstdio>
#include <vector>
#include "kernels/expert_ffn.h"
#include "kernels/cpu_features.h"
using namespace moelab;
int main() {
  ThreadPool pool(2);
  const int64_t d = 1024, I = 3584, E = 32;
  std::vector<Bf16> gu(E * 2 * I * d, 0x3c00), dn(E * d * I, 0x3c00);
  for (int64_t tokens : {1, 4, 8, 256, 1024}) {
    std::vector<float> x(tokens * d, 0.01f), out(tokens * d);
    ExpertFfnScratch s;
    auto t0 = std::chrono::steady_clock::now();
    int reps = tokens >= 256 ? 8 : 64;
    for (int r = 0; r < reps; ++r) {
      int64_t e = r % E;
      ExpertFfn(x.data(), tokens, d, I, gu.data() + e * 2 * I * d, dn.data() + e * d * I, out.data(), pool, s);
    }
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    std::printf("tokens %ld: %.3f ms, %.1f GB/s, %.1f GFLOP/s\n", tokens, sec * 1e3, ExpertFfnWeightBytes(d, I) / sec / 1e9, ExpertFfnFlops(tokens, d, I) / sec / 1e9);
  }
}
