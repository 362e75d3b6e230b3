#include "base/limits.h"

#include <cmath>
#include <sstream>

#include "base/error.h"

namespace moelab::base {

namespace {

std::string Shortest(double value) {
  std::ostringstream text;
  text.precision(6);
  text << value;
  return text.str();
}

}  // namespace

int64_t CheckCount(int64_t value, int64_t minimum, int64_t maximum, const std::string& name,
                   const std::string& why) {
  if (value < minimum) {
    throw Error(name + " " + std::to_string(value) + ": must be at least " +
                std::to_string(minimum));
  }
  if (value > maximum) {
    throw Error(name + " " + std::to_string(value) + ": above the limit of " +
                std::to_string(maximum) + " (" + why + "; docs/limits.md)");
  }
  return value;
}

double CheckSeconds(double value, const std::string& name) {
  if (!std::isfinite(value) || value < 0) {
    throw Error(name + " " + Shortest(value) + ": expected a finite number of seconds >= 0");
  }
  if (value > kMaxSeconds) {
    throw Error(name + " " + Shortest(value) + " s: above the limit of " + Shortest(kMaxSeconds) +
                " s (11.6 days; docs/limits.md)");
  }
  return value;
}

}  // namespace moelab::base
