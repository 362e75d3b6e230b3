#include "device/gpu_devices.h"

#include <gtest/gtest.h>

namespace moelab::device {
namespace {

TEST(GpuDevices, DetectionNeverFailsAndExplainsAbsence) {
  const GpuInventory inventory = DetectGpus();
  if (inventory.devices.empty()) {
    EXPECT_FALSE(inventory.why_none.empty());
    EXPECT_EQ(inventory.why_none.find('\n'), std::string::npos);  // one line
  } else {
    EXPECT_TRUE(inventory.why_none.empty());
    EXPECT_FALSE(inventory.devices[0].name.empty());
  }
}

TEST(GpuDevices, SmokeKernelWritesExpectedValues) {
  const GpuInventory inventory = DetectGpus();
  if (inventory.devices.empty()) GTEST_SKIP() << "needs a GPU: " << inventory.why_none;
  std::string error;
  EXPECT_TRUE(RunGpuSmokeKernel(0, 1000, &error)) << error;
}

}  // namespace
}  // namespace moelab::device
