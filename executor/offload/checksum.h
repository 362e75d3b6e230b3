#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace moelab::executor::offload {

// A 64-bit checksum of an expert block (xxHash64's round on four independent lanes, so it runs at
// memory speed): cheap enough to verify every block read back from storage. Not cryptographic; it
// catches truncation, bit rot and a file from another build.
uint64_t Checksum64(std::span<const std::byte> bytes);

// What the offload reader does with every block it has read, after the read: checks the payload
// against its recorded checksum and, when it matches, copies it into the expert's two weight
// buffers (first.size() + second.size() == payload.size()). False on a mismatch (nothing copied).
// The profiler's expert_load operator times this call: on a CPU-only machine it is the reader's
// share of the cores, the storage tier's "link".
bool VerifiedCopy(std::span<const std::byte> payload, uint64_t expected_checksum,
                  std::span<std::byte> first, std::span<std::byte> second);

}  // namespace moelab::executor::offload
