#pragma once

namespace moelab::base {

// What the kernel reports available now (MemAvailable in /proc/meminfo), in bytes; 0 when unknown,
// in which case callers skip their memory check rather than guess.
double MemAvailableBytes();

}  // namespace moelab::base
