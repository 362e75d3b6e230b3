#pragma once

#include <string>
#include <vector>

namespace moelab {

// Instruction sets the kernels have paths for, chosen at run time.
enum class Isa { kScalar, kAvx2, kAvx512Bf16 };

std::string ToString(Isa isa);

// What this CPU supports (AVX2 needs FMA too; AVX512-BF16 needs F, BW, VL and BF16).
std::vector<Isa> SupportedIsas();

// The ISA the kernels use: MOELAB_ISA=scalar|avx2|avx512bf16 when set (an unsupported or unknown
// value is an error), else the best supported. Read once, at first use.
Isa ActiveIsa();

// Overrides the active ISA (tests and benchmarks run every path); refuses unsupported ones.
void SetActiveIsa(Isa isa);

// CPU model name and flags, for provenance.
std::string CpuModelName();

}  // namespace moelab
