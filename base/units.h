#pragma once

#include <string>

namespace moelab {

// A byte size as users write it: "24GB", "24 GB", "16GiB", "512MB", "25769803776" (bytes);
// decimal (KB, MB, GB, TB, or K, M, G, T) and binary (KiB ... TiB) units, case-insensitive.
// Throws moelab::Error naming `what` (e.g. "--accelerator-memory") unless the value is a finite
// positive number with a known unit.
double ParseBytes(const std::string& text, const std::string& what);

}  // namespace moelab
