#include "profiler/machine_limits.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu_features.h"
#include "base/error.h"

namespace moelab::profiler {

float ReadStreamAvx512(const char* data, size_t bytes);
float ReadStreamAvx2(const char* data, size_t bytes);

namespace {
bool HasAvx2Fma() {
  const std::vector<kernels::Isa> isas = kernels::SupportedIsas();
  return std::find(isas.begin(), isas.end(), kernels::Isa::kAvx2) != isas.end();
}
}  // namespace

float ReadStream(const char* data, size_t bytes) {
  if (kernels::ActiveIsa() == kernels::Isa::kAvx512Bf16) return ReadStreamAvx512(data, bytes);
  if (HasAvx2Fma()) return ReadStreamAvx2(data, bytes);
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

namespace {

// Best wall time of `repetitions` runs of `body` on every pool thread at once.
template <typename Body>
double BestSeconds(kernels::ThreadPool& pool, int repetitions, Body body) {
  double best = 0;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    pool.Run(pool.size(), body);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == 0 || seconds < best) best = seconds;
  }
  return best;
}

}  // namespace

nlohmann::json MeasureMachineLimits(kernels::ThreadPool& pool, size_t buffer_bytes,
                                    int repetitions) {
  if (repetitions < 1) throw base::Error("machine limits: repetitions must be >= 1");
  const size_t threads = static_cast<size_t>(pool.size());
  const size_t chunk = buffer_bytes / threads / 256 * 256;
  if (chunk == 0)
    throw base::Error("machine limits: buffer of " + std::to_string(buffer_bytes) +
                      " bytes is too small");
  std::unique_ptr<char, decltype(&std::free)> buffer(
      static_cast<char*>(std::aligned_alloc(64, chunk * threads)), &std::free);
  if (!buffer)
    throw base::Error("machine limits: cannot allocate " + std::to_string(chunk * threads) +
                      " bytes");
  std::memset(buffer.get(), 1, chunk * threads);
  std::vector<float> sinks(threads);
  const double read_s = BestSeconds(pool, repetitions, [&](int64_t task, int) {
    sinks[static_cast<size_t>(task)] =
        ReadStream(buffer.get() + static_cast<size_t>(task) * chunk, chunk);
  });
  nlohmann::json limits;
  limits["dram_read_bytes_per_s"] = static_cast<double>(chunk * threads) / read_s;
  limits["peak_flops"] = nlohmann::json::object();
  std::string method = "best of " + std::to_string(repetitions) +
                       ": every thread streams its share of a " + std::to_string(chunk * threads) +
                       "-byte buffer";
  // FLOP/s of every thread running loop(iterations) on registers.
  const auto peak = [&](float (*loop)(int64_t), int64_t iterations, double flops_per_iteration) {
    const double seconds = BestSeconds(pool, repetitions, [&](int64_t task, int) {
      sinks[static_cast<size_t>(task)] = loop(iterations);
    });
    return static_cast<double>(threads) * static_cast<double>(iterations) * flops_per_iteration /
           seconds;
  };
  if (kernels::ActiveIsa() == kernels::Isa::kAvx512Bf16) {
    limits["peak_flops"]["bf16"] = peak(Bf16DotLoop, 2'000'000, kBf16DotLoopFlopsPerIteration);
    method += "; every thread runs 12 independent vdpbf16ps chains on registers";
  } else {
    method += "; no bf16 peak: the CPU lacks AVX512-BF16";
  }
  if (HasAvx2Fma()) {
    limits["peak_flops"]["fp32"] = peak(Fp32FmaLoop, 4'000'000, kFp32FmaLoopFlopsPerIteration);
    method += "; every thread runs 12 independent 256-bit fp32 FMA chains on registers";
  }
  limits["threads"] = static_cast<int64_t>(threads);
  limits["method"] = method;
  return limits;
}

}  // namespace moelab::profiler
