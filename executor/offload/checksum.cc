#include "executor/offload/checksum.h"

#include <cstring>

#include "base/hash.h"

namespace moelab::executor::offload {
namespace {

constexpr uint64_t kPrime1 = 0x9e3779b185ebca87ULL;
constexpr uint64_t kPrime2 = 0xc2b2ae3d27d4eb4fULL;

inline uint64_t Round(uint64_t lane, uint64_t word) {
  lane += word * kPrime2;
  lane = (lane << 31) | (lane >> 33);
  return lane * kPrime1;
}

inline uint64_t Load(const std::byte* p) {
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
}

}  // namespace

uint64_t Checksum64(std::span<const std::byte> bytes) {
  uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
  const std::byte* p = bytes.data();
  size_t left = bytes.size();
  for (; left >= 32; left -= 32, p += 32) {
    for (int i = 0; i < 4; ++i) lanes[i] = Round(lanes[i], Load(p + 8 * i));
  }
  uint64_t hash =
      base::Mix64(lanes[0] ^ base::Mix64(lanes[1] ^ base::Mix64(lanes[2] ^ base::Mix64(lanes[3]))));
  for (; left >= 8; left -= 8, p += 8) hash = base::Mix64(hash ^ Load(p));
  for (; left > 0; --left, ++p) hash = base::Mix64(hash ^ static_cast<uint64_t>(*p));
  return base::Mix64(hash ^ bytes.size());
}

bool VerifiedCopy(std::span<const std::byte> payload, uint64_t expected_checksum,
                  std::span<std::byte> first, std::span<std::byte> second) {
  if (first.size() + second.size() != payload.size() || Checksum64(payload) != expected_checksum)
    return false;
  std::memcpy(first.data(), payload.data(), first.size());
  std::memcpy(second.data(), payload.data() + first.size(), second.size());
  return true;
}

}  // namespace moelab::executor::offload
