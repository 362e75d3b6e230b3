#include "kernels/weight_memory.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kernels/packed_matrix.h"
#include "kernels/quantized_matrix.h"

namespace moelab::kernels {
namespace {

uintptr_t Address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// The VmFlags of the mapping (/proc/self/smaps) that holds `p`; empty if none is found.
std::string VmFlagsOf(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = Address(p) >= begin && Address(p) < end;
      continue;
    }
    if (inside && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

bool KernelHasTransparentHugePages() {
  return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

// Weights from 2 MiB up lie on whole 2 MiB pages advised to huge pages (the mapping's VmFlags
// carry "hg"); smaller ones are 64-byte aligned, as the kernels' aligned loads need.
TEST(WeightMemory, LargeWeightsAreOnAdvisedHugePagesSmallOnesAligned) {
  const size_t bytes = 5 * kHugePageBytes + 12345;
  void* large = AllocateWeightBytes(bytes);
  EXPECT_EQ(Address(large) % kHugePageBytes, 0u);
  std::memset(large, 0x5a, bytes);  // all of it usable
  if (KernelHasTransparentHugePages()) {
    EXPECT_NE(VmFlagsOf(large).find(" hg"), std::string::npos) << VmFlagsOf(large);
  } else {
    GTEST_LOG_(INFO) << "no transparent huge pages in this kernel: only the alignment is checked";
  }
  FreeWeightBytes(large);
  void* small = AllocateWeightBytes(100);
  EXPECT_EQ(Address(small) % 64, 0u);
  std::memset(small, 0x5a, 100);
  FreeWeightBytes(small);
}

// The executor's weight types take their storage from it.
TEST(WeightMemory, WeightMatricesUseIt) {
  const PackedBf16Matrix packed(4096, 1024);  // 8 MiB
  EXPECT_EQ(Address(packed.data()) % kHugePageBytes, 0u);
  const PackedBf16Matrix router(8, 1024);
  EXPECT_EQ(Address(router.data()) % 64, 0u);
  const QuantizedMatrix quantized(QuantFormat::kQ8_0, 4096, 1024);  // 4.25 MiB
  EXPECT_EQ(Address(quantized.data()) % kHugePageBytes, 0u);
}

}  // namespace
}  // namespace moelab::kernels
