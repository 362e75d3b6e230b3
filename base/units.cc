#include "base/units.h"

#include <cctype>
#include <cmath>
#include <exception>
#include <sstream>
#include <utility>

#include "base/error.h"
#include "base/message_text.h"

namespace moelab::base {

double ParseBytes(const std::string& text, const std::string& what) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit, unit_as_written;
  for (size_t i = used; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i]))) {
      unit_as_written += text[i];
      unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
    }
  }
  // "Gb", "Mb", "GiB" written "Gib": a capital prefix before a small b is the usual notation for
  // bits; read as bytes it was an 8x larger memory, silently. All-small "gb" stays bytes.
  if (unit_as_written.size() >= 2 && unit_as_written.back() == 'b' &&
      std::isupper(static_cast<unsigned char>(unit_as_written.front()))) {
    throw Error(what + " '" + EscapeForMessage(text) + "': '" + EscapeForMessage(unit_as_written) +
                "' reads as bits; write a byte unit (e.g. " + unit_as_written.substr(0, 1) +
                "B or " + unit_as_written.substr(0, 1) + "iB)");
  }
  static const std::pair<const char*, double> kUnits[] = {{"", 1},
                                                          {"B", 1},
                                                          {"KB", 1e3},
                                                          {"MB", 1e6},
                                                          {"GB", 1e9},
                                                          {"TB", 1e12},
                                                          {"K", 1e3},
                                                          {"M", 1e6},
                                                          {"G", 1e9},
                                                          {"T", 1e12},
                                                          {"PB", 1e15},
                                                          {"EB", 1e18},
                                                          {"P", 1e15},
                                                          {"E", 1e18},
                                                          {"KIB", 1024.0},
                                                          {"MIB", 1048576.0},
                                                          {"GIB", 1073741824.0},
                                                          {"TIB", 1099511627776.0},
                                                          {"PIB", 0x1p50},
                                                          {"EIB", 0x1p60}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  if (used == 0 || scale == 0 || !std::isfinite(value) || !(value > 0)) {
    throw Error(what + " '" + EscapeForMessage(text) +
                "': expected a positive size in bytes or with a unit (e.g. 24GB, 16GiB, 512MB)");
  }
  if (!(value * scale <= kMaxBytes)) {
    std::ostringstream bytes;  // 1e100 as 1e+100, not a hundred digits
    bytes << value * scale;
    throw Error(what + " '" + EscapeForMessage(text) + "': " + bytes.str() +
                " bytes is above the largest size accepted, 1 EiB (2^60 bytes)");
  }
  // A count of bytes is whole: 1.5 was taken as 1 byte downstream. (With a unit, the fraction of
  // a byte left by 1.3GiB is rounding, not a request for part of a byte.)
  if (scale == 1 && value != std::floor(value)) {
    throw Error(what + " '" + EscapeForMessage(text) +
                "': expected a whole number of bytes (or a size with a unit, e.g. 1.5GB)");
  }
  const double bytes = scale == 1 ? value : std::round(value * scale);
  // 1e-9KB is positive as written but rounds to no bytes at all: a size of 0 downstream.
  if (bytes < 1) {
    throw Error(what + " '" + EscapeForMessage(text) +
                "': less than one byte; expected a positive size (e.g. 24GB, 16GiB, 512MB)");
  }
  return bytes;
}

}  // namespace moelab::base
