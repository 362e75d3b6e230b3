#pragma once

#include "fit/latency_profile.h"
#include "model/hardware_spec.h"

namespace moelab::fit {

// The profiled machine as the offload simulator's hardware when the executor offloads experts to
// storage (executor/offload/): the compute device (the simulator's "accelerator") is the profiled
// CPU -- its measured peak FLOP/s (bf16 weights are multiplied with fp32 FMAs on AVX2, so a
// profile without a bf16 peak gets the fp32 one under "bf16"), its measured DRAM read bandwidth,
// and `memory_bytes` (the RAM the run may use: non-expert weights, KV cache and the expert
// budget) --; the host is the same CPU (HardwareFromProfile) with no RAM of its own (dram_bytes 0:
// there is no second memory tier, so every expert outside the cache lives on storage) and the
// storage read bandwidth of the largest storage_read sample (O_DIRECT at expert-sized blocks); the
// host link is the reader's checksum and copy from the read buffer into the cache (the largest
// expert_load sample; DRAM read bandwidth / 3 for a profile without them) with storage's per-read
// latency from the smallest sample (its median minus its
// bytes at that bandwidth, at least 0). Error naming the profile when it has no machine limits or
// no storage_read samples, or memory_bytes is not > 0. `storage_read_bytes_per_s` > 0 replaces the
// profile's single-stream read bandwidth with one measured at the executor's reader concurrency
// (validate's storage probe: the disk serves concurrent reads faster than one stream); the latency
// stays the profile's. compute_device_is_host is set: the simulator runs static-split's "CPU"
// experts on the same cores after a read, and charges the link's work to them.
// `reads_in_flight` (>= 1): the reads the executor's reader keeps in flight (--offload-readers);
// they share the bandwidth, so two reads issued together both land after twice one read's time
// (the simulator's processor sharing), which is what the executor's reader does.
model::HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes,
                                                   double storage_read_bytes_per_s = 0,
                                                   int64_t reads_in_flight = 1);

}  // namespace moelab::fit
