// cuBLAS is opened the first time moelab calls it (device/cublas_on_demand.cc), not when a binary
// starts: every command used to load libcublas and libcublasLt before parsing its options.
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "device/cuda_profile.h"

namespace moelab::device {
namespace {

bool CublasMapped() {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find("libcublas.so") != std::string::npos;
}

#ifdef MOELAB_WITH_CUDA
TEST(CublasOnDemand, LoadedOnTheFirstCallNotAtStart) {
  EXPECT_FALSE(CublasMapped()) << "libcublas was loaded before any cuBLAS call";
  // cublasGetProperty needs no GPU: the forwarding is exercised on any machine with the toolkit.
  const std::string version = CublasVersion();
  ASSERT_FALSE(version.empty()) << "libcublas could not be opened on first use";
  // cuBLAS's major version is its toolkit's (13 in CUDA 13).
  EXPECT_EQ(version.substr(0, version.find('.')), std::to_string(MOELAB_CUDA_TOOLKIT_MAJOR));
  EXPECT_TRUE(CublasMapped());
}
#else
TEST(CublasOnDemand, NoCublasWithoutCuda) {
  EXPECT_EQ(CublasVersion(), "");
  EXPECT_FALSE(CublasMapped());
}
#endif

}  // namespace
}  // namespace moelab::device
