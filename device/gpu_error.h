#pragma once

#include <stdexcept>
#include <string>

namespace moelab::device {

// A CUDA or cuBLAS failure (or no CUDA at all). Not a moelab::Error: device/ depends on nothing of
// ours; callers turn it into a note, a failed sample or a one-line error.
class GpuError : public std::runtime_error {
 public:
  explicit GpuError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace moelab::device
