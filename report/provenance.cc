#include "report/provenance.h"

#include <unistd.h>

#include <ctime>
#include <iomanip>
#include <sstream>

#include <boost/version.hpp>

#include "moelab_git_commit.h"
#ifndef MOELAB_VERSION
#define MOELAB_VERSION "0.0.0"
#endif

namespace moelab::report {
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

std::string Compiler() {
#if defined(__clang__)
  return std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  return "g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
         std::to_string(__GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
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
          {"time_utc", UtcNow()},
          {"build",
           {{"compiler", Compiler()},
            {"cxx_standard", static_cast<int64_t>(__cplusplus)},
            {"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                                  std::to_string(NLOHMANN_JSON_VERSION_PATCH)},
            {"boost", std::to_string(BOOST_VERSION / 100000) + "." +
                          std::to_string(BOOST_VERSION / 100 % 1000) + "." +
                          std::to_string(BOOST_VERSION % 100)}}}};
}

}  // namespace moelab::report
