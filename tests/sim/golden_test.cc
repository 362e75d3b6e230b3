// Golden regression folder (tests/sim/golden/README.md): each case's command is run through the
// moelab binary and its JSON compared with expected.json -- strictly on structure (same keys, same
// kinds of values, same array lengths, equal strings and integers), within 1e-9 relative on
// floating-point numbers. MOELAB_UPDATE_GOLDEN=1 rewrites the expected files instead.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.h"

namespace moelab {
namespace {

using testing::RunMoelab;
using testing::Slurp;

constexpr char kSharedData[] = "${SHARED_DATA}";

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); !from.empty() && at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

// Machine-specific strings back to their placeholder.
void Normalize(nlohmann::json& json, const std::string& shared) {
  if (json.is_string()) {
    json = Replace(json.get<std::string>(), shared, kSharedData);
  } else if (json.is_structured()) {
    for (auto& item : json) Normalize(item, shared);
  }
}

std::string Kind(const nlohmann::json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number()) return "number";
  return value.type_name();
}

void Compare(const nlohmann::json& expected, const nlohmann::json& actual,
             const std::string& path) {
  ASSERT_EQ(Kind(expected), Kind(actual)) << path;
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      ASSERT_TRUE(actual.contains(key)) << path << "." << key << " is missing";
      Compare(value, actual[key], path + "." + key);
    }
    for (const auto& [key, value] : actual.items()) {
      EXPECT_TRUE(expected.contains(key))
          << path << "." << key << " is new (update the golden file?)";
    }
  } else if (expected.is_array()) {
    ASSERT_EQ(expected.size(), actual.size()) << path;
    for (size_t i = 0; i < expected.size(); ++i)
      Compare(expected[i], actual[i], path + "[" + std::to_string(i) + "]");
  } else if (expected.is_number_float()) {
    const double a = expected.get<double>(), b = actual.get<double>();
    EXPECT_LE(std::fabs(a - b), 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-15)
        << path << ": " << a << " vs " << b;
  } else {
    EXPECT_EQ(expected, actual) << path;
  }
}

TEST(SimGolden, EveryCaseMatchesItsExpectedJson) {
  const std::filesystem::path root = MOELAB_SIM_GOLDEN_DIR;
  const std::string shared = testing::SharedDataDir().string();
  const bool update = std::getenv("MOELAB_UPDATE_GOLDEN") != nullptr;
  int cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    std::string command = Slurp(entry.path() / "command.txt");
    while (!command.empty() && (command.back() == '\n' || command.back() == ' '))
      command.pop_back();
    if (command.find(kSharedData) != std::string::npos && !std::filesystem::exists(shared)) {
      std::cout << "skipping " << entry.path().filename() << ": no " << shared << "\n";
      continue;
    }
    ++cases;
    SCOPED_TRACE(entry.path().filename().string());
    const auto run = RunMoelab(Replace(command, kSharedData, shared) + " --json");
    ASSERT_EQ(run.status, 0) << run.err;
    nlohmann::json actual = nlohmann::json::parse(run.out);
    actual.erase("provenance");  // command line, host and time: the only fields that may differ
    Normalize(actual, shared);
    const std::filesystem::path expected_file = entry.path() / "expected.json";
    if (update) {
      std::ofstream(expected_file) << actual.dump(2) << "\n";
      continue;
    }
    Compare(nlohmann::json::parse(Slurp(expected_file)), actual, "$");
  }
  EXPECT_GE(cases, 5);
}

}  // namespace
}  // namespace moelab
