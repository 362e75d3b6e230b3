#include "kernels/weight_memory.h"

#include <cstdlib>
#include <sys/mman.h>

namespace moelab::kernels {

void* AllocateWeightBytes(size_t bytes) {
  const bool huge = bytes >= kHugePageBytes;
  const size_t alignment = huge ? kHugePageBytes : 64;
  // aligned_alloc wants a multiple of the alignment; a whole last huge page costs under 2 MiB.
  const size_t size = (bytes + alignment - 1) / alignment * alignment;
  void* memory = std::aligned_alloc(alignment, size == 0 ? alignment : size);
  if (memory == nullptr) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  // Advice only: its failure (a kernel without THP) leaves 4 KiB pages, the same memory.
  if (huge) (void)madvise(memory, size, MADV_HUGEPAGE);
#endif
  return memory;
}

void FreeWeightBytes(void* memory) noexcept { std::free(memory); }

}  // namespace moelab::kernels
