#include "base/units.h"

#include <cctype>
#include <cmath>
#include <exception>
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
  std::string unit;
  for (size_t i = used; i < text.size(); ++i) {
    if (!std::isspace(static_cast<unsigned char>(text[i])))
      unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
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
                                                          {"KIB", 1024.0},
                                                          {"MIB", 1048576.0},
                                                          {"GIB", 1073741824.0},
                                                          {"TIB", 1099511627776.0}};
  double scale = 0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  if (used == 0 || scale == 0 || !std::isfinite(value) || !(value > 0)) {
    throw Error(what + " '" + EscapeForMessage(text) +
                "': expected a positive size in bytes or with a unit (e.g. 24GB, 16GiB, 512MB)");
  }
  if (!(value * scale <= kMaxBytes)) {
    throw Error(what + " '" + EscapeForMessage(text) + "': " + std::to_string(value * scale) +
                " bytes is above the largest size accepted, 1 EiB (2^60 bytes)");
  }
  return value * scale;
}

}  // namespace moelab::base
