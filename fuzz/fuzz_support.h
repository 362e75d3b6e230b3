#pragma once

// What every fuzz target shares: the input as text, as a file, and the one rule the targets check.
//
// The rule: a parser given any bytes either returns or throws moelab::Error (a message for the
// user). Any other exception (which the CLI reports as "internal error", exit 3), a crash, a
// sanitizer report, a hang or unbounded memory is a finding.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_reader.h"

namespace moelab::fuzz {

inline std::string_view Text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A folder of this process's own under the temp dir, for parsers that take a path.
inline std::filesystem::path WorkDir() {
  static const std::filesystem::path dir = [] {
    const auto path =
        std::filesystem::temp_directory_path() / ("moelab-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

inline std::filesystem::path WriteInput(const uint8_t* data, size_t size, const std::string& name) {
  const std::filesystem::path file = WorkDir() / name;
  std::ofstream(file, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}

// Runs `parse`; a moelab::Error is the expected way to refuse, anything else escapes to libFuzzer.
template <typename Parse>
void Refuses(Parse parse) {
  try {
    parse();
  } catch (const base::Error&) {
  }
}

// JSON targets: the bytes through the project's one JSON parser, then `from_json` on the document.
template <typename FromJson>
void ParseJsonThen(const uint8_t* data, size_t size, FromJson from_json) {
  Refuses([&] { from_json(base::ParseJsonText(Text(data, size), "fuzz.json")); });
}

}  // namespace moelab::fuzz
