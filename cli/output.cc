#include "cli/output.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "moelab_git_commit.h"
#ifndef MOELAB_VERSION
#define MOELAB_VERSION "0.0.0"
#endif

namespace moelab::cli {
namespace {

std::string& CommandLine() {
  static std::string command_line;
  return command_line;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::ostringstream out;
  out << std::put_time(&tm, "%Y-%m-%dT%H:%M:%SZ");
  return out.str();
}

}  // namespace

void SetCommandLine(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    if (i > 0) line += ' ';
    line += argv[i];
  }
  CommandLine() = line;
}

nlohmann::json Provenance() {
  return {{"tool", "moelab"},
          {"version", MOELAB_VERSION},
          {"git_commit", MOELAB_GIT_COMMIT},
          {"command", CommandLine()},
          {"host", HostName()},
          {"time_utc", UtcNow()}};
}

void EmitJson(const nlohmann::json& json, const std::string& out) {
  const std::string text = json.dump(2) + "\n";
  if (out.empty()) {
    std::cout << text;
  } else {
    WriteFileAtomically(out, text);
  }
}

std::string Table::Render() const {
  std::vector<size_t> widths(header_.size());
  for (size_t i = 0; i < header_.size(); ++i) widths[i] = header_[i].size();
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
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

std::string FormatSeconds(double seconds) {
  if (seconds >= 1.0) return FormatNumber(seconds, 3) + " s";
  if (seconds >= 1e-3) return FormatNumber(seconds * 1e3, 3) + " ms";
  return FormatNumber(seconds * 1e6, 1) + " us";
}

}  // namespace moelab::cli
