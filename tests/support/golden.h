#pragma once

// Golden regression folders: one sub-folder per case with `command.txt` (the arguments after
// `moelab`, one line; `--json` is appended) and `expected.json` (the JSON report without
// `provenance`). Placeholders in commands and strings: ${SHARED_DATA} = ../shared/data (the case is
// skipped when it is absent), ${TEST_DATA} = tests/data. Comparison: strict on structure (the same
// keys, kinds of value -- integer, number, string, boolean, null, array, object --, array lengths,
// equal strings, integers and booleans), floating-point numbers within 1e-9 relative.
// MOELAB_UPDATE_GOLDEN=1 rewrites the expected files instead of comparing.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"
#include "tests/support/test_paths.h"

namespace moelab::testing {

inline std::string ReplaceAll(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); !from.empty() && at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// (placeholder, this machine's path) pairs.
inline std::vector<std::pair<std::string, std::string>> GoldenPlaceholders() {
  return {{"${SHARED_DATA}", SharedDataDir().string()}, {"${TEST_DATA}", TestDataDir().string()}};
}

// Machine-specific strings back to their placeholders.
inline void NormalizeGolden(nlohmann::json& json) {
  if (json.is_string()) {
    std::string text = json.get<std::string>();
    for (const auto& [placeholder, path] : GoldenPlaceholders())
      text = ReplaceAll(text, path, placeholder);
    json = text;
  } else if (json.is_structured()) {
    for (auto& item : json) NormalizeGolden(item);
  }
}

inline std::string JsonKind(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

inline void CompareGolden(const nlohmann::json& expected, const nlohmann::json& actual,
                          const std::string& path) {
  ASSERT_EQ(JsonKind(expected), JsonKind(actual)) << path;
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      ASSERT_TRUE(actual.contains(key)) << path << "." << key << " is missing";
      CompareGolden(value, actual[key], path + "." + key);
    }
    for (const auto& [key, value] : actual.items()) {
      EXPECT_TRUE(expected.contains(key))
          << path << "." << key << " is new (update the golden file?)";
    }
  } else if (expected.is_array()) {
    ASSERT_EQ(expected.size(), actual.size()) << path;
    for (size_t i = 0; i < expected.size(); ++i)
      CompareGolden(expected[i], actual[i], path + "[" + std::to_string(i) + "]");
  } else if (expected.is_number_float()) {
    const double a = expected.get<double>(), b = actual.get<double>();
    EXPECT_LE(std::fabs(a - b), 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-15)
        << path << ": " << a << " vs " << b;
  } else {
    EXPECT_EQ(expected, actual) << path;
  }
}

// Runs every case under `root`; returns how many ran (skipped ones excluded).
inline int RunGoldenFolder(const std::filesystem::path& root) {
  const bool update = std::getenv("MOELAB_UPDATE_GOLDEN") != nullptr;
  std::vector<std::filesystem::path> cases;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (entry.is_directory()) cases.push_back(entry.path());
  }
  std::sort(cases.begin(), cases.end());
  int ran = 0;
  for (const std::filesystem::path& dir : cases) {
    std::string command = Slurp(dir / "command.txt");
    while (!command.empty() && (command.back() == '\n' || command.back() == ' '))
      command.pop_back();
    if (command.find("${SHARED_DATA}") != std::string::npos &&
        !std::filesystem::exists(SharedDataDir())) {
      std::cout << "skipping " << dir.filename() << ": no " << SharedDataDir() << "\n";
      continue;
    }
    for (const auto& [placeholder, path] : GoldenPlaceholders())
      command = ReplaceAll(command, placeholder, path);
    ++ran;
    SCOPED_TRACE(dir.filename().string());
    const CliRun run = RunMoelab(command + " --json");
    EXPECT_EQ(run.status, 0) << run.err;
    if (run.status != 0) continue;
    nlohmann::json actual = nlohmann::json::parse(run.out);
    actual.erase(
        "provenance");  // command line, host, time and build: the only fields that may differ
    NormalizeGolden(actual);
    const std::filesystem::path expected_file = dir / "expected.json";
    if (update) {
      std::ofstream(expected_file) << actual.dump(2) << "\n";
      continue;
    }
    CompareGolden(nlohmann::json::parse(Slurp(expected_file)), actual, "$");
  }
  return ran;
}

}  // namespace moelab::testing
