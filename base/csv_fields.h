#pragma once

#include <string>
#include <vector>

namespace moelab::base {

// The small CSV tables moelab reads (SD measurements, traces, length tables): plain comma-separated
// fields, no quoting. TrimCsvField drops spaces, tabs and a carriage return around a field;
// SplitCsvLine gives every field trimmed, a trailing comma giving a last empty field.
std::string TrimCsvField(const std::string& text);
std::vector<std::string> SplitCsvLine(const std::string& line);

}  // namespace moelab::base
