#include "profiler/machine_info.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "base/system_memory.h"
#include "device/cuda_profile.h"
#include "kernels/cpu_features.h"

#ifndef MOELAB_BENCHMARK_VERSION
#define MOELAB_BENCHMARK_VERSION "unknown"
#endif

namespace moelab::profiler {
namespace {

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32768K" -> 33554432; 0 when unparsable.
int64_t ParseCacheSize(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    return 0;
  }
  const std::string suffix = text.substr(used);
  if (suffix == "K") return value * 1024;
  if (suffix == "M") return value * 1024 * 1024;
  if (suffix == "G") return value * 1024 * 1024 * 1024;
  return suffix.empty() ? value : 0;
}

std::string CompilerVersion() {
#if defined(__clang__)
  return std::string("clang++ ") + __clang_version__;
#elif defined(__GNUC__)
  return std::string("g++ ") + __VERSION__;
#else
  return "unknown";
#endif
}

}  // namespace

int64_t L3CacheBytes() {
  for (int index = 0; index < 10; ++index) {
    const std::string dir =
        "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    if (ReadLine(dir + "level") != "3") continue;
    const int64_t bytes = ParseCacheSize(ReadLine(dir + "size"));
    if (bytes > 0) return bytes;
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long bytes = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (bytes > 0) return bytes;
#endif
  return 0;
}

double PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? static_cast<double>(pages) * static_cast<double>(page_size)
                                    : 0.0;
}

double AvailableMemoryBytes() {
  const double available = base::MemAvailableBytes();
  return available > 0 ? available : PhysicalMemoryBytes();
}

int PhysicalCores() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::string physical = "0";
  std::set<std::string> cores;
  while (std::getline(cpuinfo, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string value = colon + 2 <= line.size() ? line.substr(colon + 2) : "";
    if (line.rfind("physical id", 0) == 0) physical = value;
    if (line.rfind("core id", 0) == 0) cores.insert(physical + "/" + value);
  }
  if (!cores.empty()) return static_cast<int>(cores.size());
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<std::string> KernelCpuFlags() {
  static const char* const kInteresting[] = {
      "sse4_2",   "avx",      "avx2",     "fma",         "f16c",        "avx512f",
      "avx512dq", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni", "avx512_fp16",
      "avx_vnni", "amx_tile", "amx_bf16", "amx_int8"};
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> present;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string word;
    while (words >> word) present.insert(word);
    break;
  }
  std::vector<std::string> flags;
  for (const char* flag : kInteresting) {
    if (present.count(flag)) flags.push_back(flag);
  }
  return flags;
}

double LoadAverage1m() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

nlohmann::json MachineJson(int threads, int64_t l3_bytes, const device::GpuInventory& gpus) {
  nlohmann::json libraries = {
      {"google_benchmark", MOELAB_BENCHMARK_VERSION},
      {"compiler", CompilerVersion()},
      {"nlohmann_json", std::to_string(NLOHMANN_JSON_VERSION_MAJOR) + "." +
                            std::to_string(NLOHMANN_JSON_VERSION_MINOR) + "." +
                            std::to_string(NLOHMANN_JSON_VERSION_PATCH)}};
  if (gpus.cuda_compiled) {
    libraries["cuda_runtime"] = gpus.runtime_version;
    const std::string cublas = device::CublasVersion();
    if (!cublas.empty()) libraries["cublas"] = cublas;
  }
  nlohmann::json gpu = nullptr;
  if (!gpus.devices.empty()) {
    const device::GpuDevice& d = gpus.devices.front();
    gpu = {{"name", d.name},
           {"driver", gpus.driver_version},
           {"cuda_runtime", gpus.runtime_version},
           {"memory_bytes", d.memory_bytes},
           {"compute_capability", std::to_string(d.compute_capability_major) + "." +
                                      std::to_string(d.compute_capability_minor)},
           {"count", gpus.devices.size()}};
  }
  return {{"cpu", kernels::CpuModelName()},
          {"flags", KernelCpuFlags()},
          {"cores", PhysicalCores()},
          {"logical_cpus", std::max(1u, std::thread::hardware_concurrency())},
          {"threads", threads},
          {"memory_bytes", PhysicalMemoryBytes()},
          {"l3_bytes", l3_bytes},
          {"isa", ToString(kernels::ActiveIsa())},
          {"quantized_kernel", ToString(kernels::ActiveQuantizedKernel())},
          {"gpu", gpu},
          {"libraries", libraries}};
}

}  // namespace moelab::profiler
