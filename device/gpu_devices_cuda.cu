#include <cuda_runtime.h>

#include <vector>

#include "device/gpu_devices.h"

namespace moelab::device {
namespace {

std::string VersionString(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

__global__ void FillIota(int* values, int count) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) values[i] = 3 * i + 1;
}

}  // namespace

GpuInventory DetectGpus() {
  GpuInventory inventory;
  inventory.cuda_compiled = true;
  int runtime = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess)
    inventory.runtime_version = VersionString(runtime);
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    inventory.driver_version = VersionString(driver);
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    // Without any driver the runtime says "driver version is insufficient", which reads as an
    // old driver to update; a driver version of 0 means none is installed.
    inventory.why_none = status == cudaErrorInsufficientDriver && driver == 0
                             ? std::string(
                                   "no usable CUDA GPU: no NVIDIA driver is installed "
                                   "(the CUDA runtime finds none)")
                             : std::string("no usable CUDA GPU: ") + cudaGetErrorString(status);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return inventory;
  }
  if (count == 0) {
    inventory.why_none = "no CUDA GPU found on this machine";
    return inventory;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    inventory.devices.push_back(GpuDevice{i, prop.name, static_cast<double>(prop.totalGlobalMem),
                                          prop.multiProcessorCount, prop.major, prop.minor,
                                          static_cast<int64_t>(prop.l2CacheSize)});
  }
  if (inventory.devices.empty())
    inventory.why_none = "CUDA reported devices but none could be queried";
  return inventory;
}

bool RunGpuSmokeKernel(int index, int count, std::string* error) {
  auto fail = [&](cudaError_t status) {
    if (error) *error = cudaGetErrorString(status);
    return false;
  };
  cudaError_t status = cudaSetDevice(index);
  if (status != cudaSuccess) return fail(status);
  int* device_values = nullptr;
  status = cudaMalloc(&device_values, sizeof(int) * count);
  if (status != cudaSuccess) return fail(status);
  FillIota<<<(count + 255) / 256, 256>>>(device_values, count);
  std::vector<int> host(count);
  status = cudaMemcpy(host.data(), device_values, sizeof(int) * count, cudaMemcpyDeviceToHost);
  cudaFree(device_values);
  if (status != cudaSuccess) return fail(status);
  for (int i = 0; i < count; ++i) {
    if (host[i] != 3 * i + 1) {
      if (error) *error = "kernel wrote a wrong value at index " + std::to_string(i);
      return false;
    }
  }
  return true;
}

}  // namespace moelab::device
