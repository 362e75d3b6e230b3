// The main of every Google Benchmark binary here: stamps report::Provenance() (commit, machine,
// compiler and library versions, command line) into the benchmark context, so every result file
// (--benchmark_out JSON, console) says where it came from, as the CLI's outputs do.
#include <string>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include "report/provenance.h"

namespace {

// Context values are strings: nested provenance fields become "provenance.build.compiler" etc.
void AddContext(const nlohmann::json& value, const std::string& key) {
  if (value.is_object()) {
    for (const auto& [name, child] : value.items()) AddContext(child, key + "." + name);
  } else {
    benchmark::AddCustomContext(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
}

}  // namespace

int main(int argc, char** argv) {
  moelab::report::SetCommandLine(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  AddContext(moelab::report::Provenance(), "provenance");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
