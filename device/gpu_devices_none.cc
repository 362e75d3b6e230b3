#include "device/gpu_devices.h"

namespace moelab::device {

GpuInventory DetectGpus() {
  GpuInventory inventory;
  inventory.why_none = "built without CUDA (configure with -DMOELAB_CUDA=ON where nvcc exists)";
  return inventory;
}

bool RunGpuSmokeKernel(int /*index*/, int /*count*/, std::string* error) {
  if (error) *error = "built without CUDA";
  return false;
}

}  // namespace moelab::device
