#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace moelab::executor::offload {

// A 64-bit checksum of an expert block (xxHash64's round on four independent lanes, so it runs at
// memory speed): cheap enough to verify every block read back from storage. Not cryptographic; it
// catches truncation, bit rot and a file from another build.
uint64_t Checksum64(std::span<const std::byte> bytes);

}  // namespace moelab::executor::offload
