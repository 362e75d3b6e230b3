#pragma once

#include <filesystem>
#include <string>

namespace moelab::testing {

// Folders the tests read, set by the build (no relative paths in tests).
std::filesystem::path TestDataDir();    // tests/data
std::filesystem::path SharedDataDir();  // ../shared/data (may be absent outside the workplace)
std::filesystem::path PresetDir();      // presets/
std::filesystem::path SourceDir();      // the checkout's root (README.md, every folder)

// A fresh empty folder under the system temp dir, unique per call.
std::filesystem::path MakeTempDir(const std::string& prefix);

}  // namespace moelab::testing
