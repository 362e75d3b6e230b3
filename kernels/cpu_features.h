#pragma once

#include <string>
#include <vector>

namespace moelab::kernels {

// Instruction sets the kernels have paths for, chosen at run time.
// avx512f: AVX-512F without BF16 (Skylake-X, Ice Lake class), the fp32-FMA family at 16 rows per
// vector.
enum class Isa { kScalar, kAvx2, kAvx512F, kAvx512Bf16 };

// Every path the kernels have, whether or not this CPU runs it (tests skip the others).
std::vector<Isa> AllIsas();

std::string ToString(Isa isa);

// What this CPU supports (AVX2 needs FMA and F16C too; AVX-512F and AVX512-BF16 also need AVX2's
// set, for the quantized kernels; AVX512-BF16 needs F, BW, VL and BF16).
std::vector<Isa> SupportedIsas();
bool IsSupported(Isa isa);

// The ISA the kernels use: MOELAB_ISA=scalar|avx2|avx512f|avx512bf16 when set (an unsupported or
// unknown value is an error), else the best supported. Read once, at first use.
Isa ActiveIsa();

// Overrides the active ISA (tests and benchmarks run every path); refuses unsupported ones.
void SetActiveIsa(Isa isa);

// The integer-dot kernel the quantized formats run on under the active ISA: "scalar", "avx2"
// (vpmaddubsw), or "avx512vnni" (vpdpbusd; an AVX-512 ISA on a CPU with AVX512-VNNI). Every kernel
// computes the same exact integer block sums, so the choice changes speed, never bits.
enum class QuantizedKernel { kScalar, kAvx2, kAvx512Vnni };
QuantizedKernel ActiveQuantizedKernel();
std::string ToString(QuantizedKernel kernel);

// CPU model name and flags, for provenance.
std::string CpuModelName();

}  // namespace moelab::kernels
