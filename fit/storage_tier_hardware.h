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
// latency from the smallest storage_read sample (its median minus its bytes at the largest's
// bandwidth, at least 0). Error naming the profile when it has no machine limits or no
// storage_read samples, or memory_bytes is not > 0.
//
// Reads are priced at the executor's reader as the profile timed it (expert_reader samples whose
// shape.reads_in_flight is `reads_in_flight`): the one alone is the storage read bandwidth, the one
// beside computation `storage_read_bandwidth_beside_compute_bytes_per_s` (the simulator's rate
// while the host computes). A profile without them (older, or at other reads in flight) prices
// reads at the largest storage_read sample's single stream, and `sources` says so.
// `storage_read_bytes_per_s` > 0 replaces both with one bandwidth the caller measured (validate's
// probes, which set the second themselves); the latency stays the profile's. compute_device_is_host
// is set: the simulator runs static-split's "CPU" experts on the same cores after a read, and
// charges the link's work to them. `reads_in_flight` (>= 1): the reads the executor's reader keeps
// in flight (--offload-readers); they share the bandwidth, so two reads issued together both land
// after twice one read's time (the simulator's processor sharing), which is what the executor's
// reader does.
//
// The computation's rate while reads are in flight (host.compute_rate_while_storage_reads): from
// the expert_reader sample beside computation that recorded one (compute_rate), by
// ComputeRateWhileReading; 1 (not coupled) without it or with a caller's bandwidth.
model::HardwareSpec StorageTierHardwareFromProfile(const Profile& profile, double memory_bytes,
                                                   double storage_read_bytes_per_s = 0,
                                                   int64_t reads_in_flight = 1);

// The simulator's rate for the computation while reads are in flight, from a reader pass beside a
// computation (executor/offload/reader_pass.h): the computation ran at `measured_compute_rate` of
// its rate alone while a read landed every `read_seconds` (the pass / its reads). The simulator
// charges each read's checksum and copy (`copy_seconds`, the link) to the computation's resource
// and slows the rest by the coupled rate, so replaying that pass it does copy_seconds /
// read_seconds of copies and the coupled rate minus that of computation: the coupled rate is
// measured_compute_rate + copy_seconds / read_seconds, at most 1 (a copy that cost the
// computation less than its price leaves the rate alone). Error unless all three are > 0.
double ComputeRateWhileReading(double measured_compute_rate, double copy_seconds,
                               double read_seconds);

}  // namespace moelab::fit
