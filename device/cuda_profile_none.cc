// The GPU profiling interface of a build without CUDA: every session refuses, saying why.
#include "device/cuda_profile.h"

namespace moelab::device {
namespace {

[[noreturn]] void NoCuda() {
  throw GpuError("built without CUDA (configure with -DMOELAB_CUDA=ON where nvcc exists)");
}

}  // namespace

struct GpuProfileSession::Impl {};

std::string CublasVersion() { return ""; }

GpuProfileSession::GpuProfileSession(int /*device_index*/, int64_t /*transfer_bytes*/) { NoCuda(); }
GpuProfileSession::~GpuProfileSession() = default;
double GpuProfileSession::CopyHostToDevice(int64_t /*bytes*/, bool /*pinned*/) { NoCuda(); }
double GpuProfileSession::CopyDeviceToHost(int64_t /*bytes*/, bool /*pinned*/) { NoCuda(); }

std::vector<float> GpuExpertFfnForCheck(int, int64_t, int64_t, int64_t, const std::vector<float>&,
                                        const std::vector<uint16_t>&,
                                        const std::vector<uint16_t>&) {
  NoCuda();
}

}  // namespace moelab::device
