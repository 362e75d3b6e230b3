#pragma once

#include "fit/latency_profile.h"
#include "model/hardware_spec.h"

namespace moelab {

// The profiled machine as the offload simulator's hardware when the executor offloads experts to
// storage (executor/offload/): the compute device (the simulator's "accelerator") is the profiled
// CPU -- its measured peak FLOP/s (bf16 weights are multiplied with fp32 FMAs on AVX2, so a
// profile without a bf16 peak gets the fp32 one under "bf16"), its measured DRAM read bandwidth,
// and `memory_bytes` (the RAM the run may use: non-expert weights, KV cache and the expert
// budget) --; the host is the same CPU (HardwareFromProfile); the host link is storage: read
// bandwidth from the largest storage_read sample (O_DIRECT at expert-sized blocks), latency from
// the smallest one (its median minus its bytes at that bandwidth, at least 0). Error naming the
// profile when it has no machine limits or no storage_read samples, or memory_bytes is not > 0.
HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes);

}  // namespace moelab
