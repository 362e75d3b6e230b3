#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/support/test_paths.h"

namespace moelab::testing {

struct CliRun {
  int status = -1;
  std::string out, err;
};

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Runs a shell command line and captures its exit status, stdout and stderr.
inline CliRun RunShell(const std::string& command_line) {
  const std::filesystem::path dir = MakeTempDir("cli-run");
  const std::string command =
      command_line + " >" + (dir / "out").string() + " 2>" + (dir / "err").string();
  const int raw = std::system(command.c_str());
  CliRun run;
  run.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  run.out = Slurp(dir / "out");
  run.err = Slurp(dir / "err");
  std::filesystem::remove_all(dir);
  return run;
}

// Runs the built moelab (MOELAB_BINARY, defined by each CLI test target) with `args` (a shell
// word list) and captures its exit status, stdout and stderr.
inline CliRun RunMoelab(const std::string& args) {
  return RunShell(std::string(MOELAB_BINARY) + " " + args);
}

}  // namespace moelab::testing
