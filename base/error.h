#pragma once

#include <stdexcept>
#include <string>

namespace moelab::base {

// The one exception type the libraries throw for bad input or impossible requests. The message is
// complete and user-facing: which file, which field, what was expected. Library code never exits;
// the CLI turns an Error into a message on stderr and a non-zero exit status.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace moelab::base
