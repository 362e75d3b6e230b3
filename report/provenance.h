#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moelab::report {

// Where every result file and JSON document comes from (the style guide's provenance rule): tool
// version, git commit, the command line, host, time, and the build: compiler and the versions of
// the libraries every output depends on. A library (not the CLI) so benchmarks stamp it too.
nlohmann::json Provenance();

// The command line Provenance() reports (set once by each program's main).
void SetCommandLine(int argc, char** argv);

}  // namespace moelab::report
