#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace moelab::base {

// Counts and byte sizes are int64; a product or sum that does not fit is an error naming the
// quantity (e.g. "total parameters"), never a wrapped negative number.
[[noreturn, gnu::cold, gnu::noinline]] inline void ThrowOverflow(int64_t a, const char* op,
                                                                 int64_t b, std::string_view what) {
  throw Error(std::string(what) + ": " + std::to_string(a) + op + std::to_string(b) +
              " overflows a 64-bit integer (above 9.2e18): the sizes given are too large");
}
// The check inline and the message's string code out of line: inlined, it made every checked
// operation a call (the offload simulator counts a model's parameters every pass).
inline int64_t CheckedResult(bool overflowed, int64_t result, int64_t a, const char* op, int64_t b,
                             std::string_view what) {
  if (overflowed) [[unlikely]]
    ThrowOverflow(a, op, b, what);
  return result;
}

inline int64_t CheckedMul(int64_t a, int64_t b, std::string_view what) {
  int64_t result = 0;
  const bool overflowed = __builtin_mul_overflow(a, b, &result);
  return CheckedResult(overflowed, result, a, " x ", b, what);
}

inline int64_t CheckedAdd(int64_t a, int64_t b, std::string_view what) {
  int64_t result = 0;
  const bool overflowed = __builtin_add_overflow(a, b, &result);
  return CheckedResult(overflowed, result, a, " + ", b, what);
}

// The product of several factors, each check naming `what`.
template <typename... Factors>
int64_t CheckedProduct(std::string_view what, int64_t first, Factors... rest) {
  int64_t result = first;
  ((result = CheckedMul(result, static_cast<int64_t>(rest), what)), ...);
  return result;
}

}  // namespace moelab::base

namespace moelab::base {

// An int64 count whose +, - and * throw moelab::Error on overflow, for formulas with many terms
// (parameter counts, byte sizes). The caller that knows the quantity catches nothing: the message
// names the operation; wrap the formula where a better name is known.
class CheckedCount {
 public:
  constexpr CheckedCount(int64_t value = 0) : value_(value) {}  // NOLINT: implicit by design
  int64_t value() const { return value_; }

  friend CheckedCount operator*(CheckedCount a, CheckedCount b) {
    return CheckedMul(a.value_, b.value_, "count");
  }
  friend CheckedCount operator+(CheckedCount a, CheckedCount b) {
    return CheckedAdd(a.value_, b.value_, "count");
  }
  friend CheckedCount operator-(CheckedCount a, CheckedCount b) {
    int64_t result = 0;
    const bool overflowed = __builtin_sub_overflow(a.value_, b.value_, &result);
    return CheckedResult(overflowed, result, a.value_, " - ", b.value_, "count");
  }
  CheckedCount& operator+=(CheckedCount other) { return *this = *this + other; }

 private:
  int64_t value_;
};

}  // namespace moelab::base
