#include "base/system_memory.h"

#include <fstream>
#include <string>

namespace moelab::base {

double MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kilobytes = 0;
  std::string unit;
  while (meminfo >> key >> kilobytes >> unit) {
    if (key == "MemAvailable:") return kilobytes * 1024.0;
  }
  return 0;
}

}  // namespace moelab::base
