#pragma once

#include <cstdint>
#include <string>
#include <vector>

// The CUDA boundary: public headers carry no CUDA types, so every other library builds without
// the toolkit. Built from gpu_devices_cuda.cu when MOELAB_WITH_CUDA, else gpu_devices_none.cc.

namespace moelab::device {

struct GpuDevice {
  int index = 0;
  std::string name;
  double memory_bytes = 0;
  int sm_count = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int64_t l2_bytes = 0;  // the L2 a weight-cycling rule works against
};

struct GpuInventory {
  bool cuda_compiled = false;
  std::vector<GpuDevice> devices;
  std::string runtime_version;  // e.g. "13.0", empty without CUDA
  std::string driver_version;
  std::string why_none;  // one line saying why no device is usable, empty when some are
};

// Never throws and never aborts: no driver, no device or a CUDA build without a GPU all come
// back as an empty device list with `why_none` set.
GpuInventory DetectGpus();

// Runs a tiny kernel on device `index` that writes `count` values and reads them back; returns
// true when they are right. Only meaningful with a device; false otherwise with `error` set.
bool RunGpuSmokeKernel(int index, int count, std::string* error);

}  // namespace moelab::device
