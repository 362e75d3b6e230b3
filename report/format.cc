#include "report/format.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iomanip>
#include <sstream>

namespace moelab::report {

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size());
  for (size_t i = 0; i < header_.size(); ++i) widths[i] = header_[i].size();
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  }
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < cells.size() ? cells[i] : "";
      if (i > 0) out << "  ";
      if (i == 0) {
        out << std::left << std::setw(static_cast<int>(widths[i])) << cell;
      } else {
        out << std::right << std::setw(static_cast<int>(widths[i])) << cell;
      }
    }
    out << "\n";
  };
  line(header_);
  std::vector<std::string> rule;
  for (size_t width : widths) rule.push_back(std::string(width, '-'));
  line(rule);
  for (const auto& row : rows_) line(row);
  return out.str();
}

std::string ShortestText(double value) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;
  return std::string(text, end);
}

std::string FormatNumber(double value, int precision) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << value;
  return out.str();
}

std::string FormatBytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000.0 && unit < 4) {
    bytes /= 1000.0;
    ++unit;
  }
  return FormatNumber(bytes, unit == 0 ? 0 : 2) + " " + units[unit];
}

std::string FormatCount(double count) {
  if (count >= 1e9) return FormatNumber(count / 1e9, 2) + " B";
  if (count >= 1e6) return FormatNumber(count / 1e6, 1) + " M";
  if (count >= 1e3) return FormatNumber(count / 1e3, 1) + " K";
  return FormatNumber(count, 0);
}

std::string FormatGigabytes(double bytes, int decimals) {
  return FormatNumber(bytes / 1e9, decimals) + " GB";
}

std::string FormatWholeGigabytes(double bytes) {
  return std::to_string(static_cast<int64_t>(bytes / 1e9)) + " GB";
}

std::string FormatWholeMegabytes(double bytes) {
  return std::to_string(static_cast<int64_t>(bytes / 1e6)) + " MB";
}

std::string FormatSeconds(double seconds) {
  if (seconds >= 1.0) return FormatNumber(seconds, 3) + " s";
  if (seconds >= 1e-3) return FormatNumber(seconds * 1e3, 3) + " ms";
  return FormatNumber(seconds * 1e6, 1) + " us";
}

}  // namespace moelab::report
