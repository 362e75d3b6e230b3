#include "kernels/cpu_features.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>

#include "base/error.h"

namespace moelab::kernels {
namespace {

std::atomic<int>& ActiveSlot() {
  static std::atomic<int> slot{-1};
  return slot;
}

}  // namespace

bool IsSupported(Isa isa) {
  const std::vector<Isa> supported = SupportedIsas();
  return std::find(supported.begin(), supported.end(), isa) != supported.end();
}

std::vector<Isa> AllIsas() { return {Isa::kScalar, Isa::kAvx2, Isa::kAvx512F, Isa::kAvx512Bf16}; }

std::string ToString(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512F:
      return "avx512f";
    case Isa::kAvx512Bf16:
      return "avx512bf16";
  }
  return "?";
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas{Isa::kScalar};
#if defined(__x86_64__)
  __builtin_cpu_init();
  // F16C (the quantized formats' fp16 scales) came with every AVX2 CPU; checked all the same.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("f16c");
  if (avx2) isas.push_back(Isa::kAvx2);
  if (avx2 && __builtin_cpu_supports("avx512f")) isas.push_back(Isa::kAvx512F);
  // AVX2's set too: without AVX512-VNNI the quantized formats run the AVX2 integer kernel.
  if (avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16")) {
    isas.push_back(Isa::kAvx512Bf16);
  }
#endif
  return isas;
}

QuantizedKernel ActiveQuantizedKernel() {
  switch (ActiveIsa()) {
    case Isa::kScalar:
      return QuantizedKernel::kScalar;
    case Isa::kAvx2:
      return QuantizedKernel::kAvx2;
    case Isa::kAvx512F:
    case Isa::kAvx512Bf16:
      break;
  }
#if defined(__x86_64__)
  static const bool vnni =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  if (vnni) return QuantizedKernel::kAvx512Vnni;
#endif
  return QuantizedKernel::kAvx2;
}

std::string ToString(QuantizedKernel kernel) {
  switch (kernel) {
    case QuantizedKernel::kScalar:
      return "scalar";
    case QuantizedKernel::kAvx2:
      return "avx2";
    case QuantizedKernel::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

void SetActiveIsa(Isa isa) {
  if (!IsSupported(isa))
    throw base::Error("instruction set '" + ToString(isa) + "' is not supported by this CPU");
  ActiveSlot().store(static_cast<int>(isa));
}

Isa ActiveIsa() {
  const int current = ActiveSlot().load();
  if (current >= 0) return static_cast<Isa>(current);
  Isa chosen = SupportedIsas().back();
  if (const char* env = std::getenv("MOELAB_ISA"); env != nullptr && *env != '\0') {
    const std::string requested = env;
    bool known = false;
    for (Isa isa : AllIsas()) {
      if (requested == ToString(isa)) {
        known = true;
        chosen = isa;
      }
    }
    if (!known)
      throw base::Error("MOELAB_ISA='" + requested +
                        "': expected scalar, avx2, avx512f or avx512bf16");
  }
  SetActiveIsa(chosen);
  return chosen;
}

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace moelab::kernels
