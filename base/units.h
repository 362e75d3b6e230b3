#pragma once

#include <string>

namespace moelab::base {

// A byte size as users write it: "24GB", "24 GB", "16GiB", "512MB", "25769803776" (bytes);
// decimal (KB, MB, GB, TB, PB, EB, or K, M, G, T, P, E) and binary (KiB ... EiB) units,
// case-insensitive except that a capital prefix before a small b ("Gb", "Mib") is bits and refused;
// a bare count of bytes is whole (1.5 is refused), a size with a unit is rounded to whole bytes.
// Throws moelab::Error naming `what` (e.g. "--accelerator-memory") unless the value is a finite
// positive number with a known unit.
// Sizes above kMaxBytes (1 EiB, 2^60 bytes: far above any machine, far below int64's 9.2e18) are
// refused, so every later byte count fits int64 and stays finite.
double ParseBytes(const std::string& text, const std::string& what);

inline constexpr double kMaxBytes = 1152921504606846976.0;  // 2^60

}  // namespace moelab::base
