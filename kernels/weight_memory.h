#pragma once

#include <cstddef>
#include <new>

// Memory for weights and for what streams like them (the DRAM probe): 64-byte aligned, and from
// 2 MiB up on whole 2 MiB pages the kernel is asked to back with transparent huge pages
// (madvise MADV_HUGEPAGE; Debian's default THP mode, "madvise", gives none without it). A decode
// step streams every weight once, and with 4 KiB pages every 4 KiB of it costs a page walk,
// which in a virtual machine walks the guest's and the host's tables: the default model's batch-1
// decode ran 4-8 % faster with huge pages on this project's AVX-512 VM (2026-12-07). Only advice:
// where the kernel has no THP, or none free, the same memory comes in 4 KiB pages.
namespace moelab::kernels {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` (> 0) of weight memory, uninitialized; std::bad_alloc when there is none. Free with
// FreeWeightBytes.
void* AllocateWeightBytes(size_t bytes);
void FreeWeightBytes(void* memory) noexcept;

// A std::vector allocator over AllocateWeightBytes.
template <typename T>
struct WeightAllocator {
  using value_type = T;
  WeightAllocator() = default;
  template <typename U>
  WeightAllocator(const WeightAllocator<U>&) {}
  T* allocate(size_t count) { return static_cast<T*>(AllocateWeightBytes(count * sizeof(T))); }
  void deallocate(T* p, size_t) { FreeWeightBytes(p); }
  bool operator==(const WeightAllocator&) const { return true; }
};

}  // namespace moelab::kernels
