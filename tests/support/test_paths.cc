#include "tests/support/test_paths.h"

#include <unistd.h>

#include <atomic>

namespace moelab::testing {

std::filesystem::path TestDataDir() { return MOELAB_TEST_DATA_DIR; }
std::filesystem::path SharedDataDir() { return MOELAB_SHARED_DATA_DIR; }
std::filesystem::path PresetDir() { return MOELAB_PRESET_DIR; }
std::filesystem::path SourceDir() { return MOELAB_SOURCE_DIR; }

std::filesystem::path MakeTempDir(const std::string& prefix) {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace moelab::testing
