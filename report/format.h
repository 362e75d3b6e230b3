#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::report {

// A plain text table with right-aligned numeric columns.
class Table {
 public:
  explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
  void AddRow(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string Render() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string FormatNumber(double value, int precision);
// The shortest text that reads back as `value` ("0.8", "4.5", "16", "4e-06").
std::string ShortestText(double value);
std::string FormatBytes(double bytes);      // "93.4 GB" (decimal units)
std::string FormatCount(double count);      // "46.70 B", "494.0 M"
std::string FormatSeconds(double seconds);  // "12.3 ms"
// Sizes in one fixed decimal unit, for messages that compare them: "17.30 GB" (`decimals` places),
// and whole units rounded down: "3 GB", "352 MB".
std::string FormatGigabytes(double bytes, int decimals);
std::string FormatWholeGigabytes(double bytes);
std::string FormatWholeMegabytes(double bytes);

}  // namespace moelab::report
