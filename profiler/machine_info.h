#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "device/gpu_devices.h"

namespace moelab::profiler {

// What a profile records about the machine it ran on (the "machine" object of moelab.profile/1).

// Last-level (L3) cache bytes: /sys/devices/system/cpu/cpu0/cache/index*/ (level 3), else
// sysconf(_SC_LEVEL3_CACHE_SIZE); 0 when neither says.
int64_t L3CacheBytes();
// Total physical memory and what the kernel reports available now (MemAvailable), in bytes.
double PhysicalMemoryBytes();
double AvailableMemoryBytes();
// Physical cores (distinct physical id / core id pairs in /proc/cpuinfo; else the hardware
// concurrency).
int PhysicalCores();
// The CPU flags that matter to the kernels (SIMD widths, FMA, BF16/VNNI/AMX), those present, in a
// fixed order.
std::vector<std::string> KernelCpuFlags();
// The 1-minute load average at call time (other work competing for the cores), -1 if unknown.
double LoadAverage1m();

// {"cpu", "flags", "cores", "logical_cpus", "threads", "memory_bytes", "l3_bytes", "isa", "gpu",
//  "libraries"}; "gpu" is null without a usable GPU, else the first device.
nlohmann::json MachineJson(int threads, int64_t l3_bytes, const device::GpuInventory& gpus);

}  // namespace moelab::profiler
