#pragma once

#include <cstdint>
#include <string>

namespace moelab::base {

// The named bounds on every count, size, time and rate an option or file can carry
// (docs/limits.md). One bound per quantity, checked wherever that quantity appears, before any work
// or allocation: a value past it is refused with one line naming the option or field as the user
// wrote it, never clamped.

// OS threads a pool or the profiler may start (--threads): far more than cores only adds switching.
inline constexpr int64_t kMaxThreads = 1024;
// Expert reads kept in flight (--offload-readers, a hardware file's storage_reads_in_flight): each
// is a thread with a block buffer of one expert, or an io_uring entry with one; an NVMe drive is
// saturated by a few dozen large reads.
inline constexpr int64_t kMaxReadsInFlight = 64;
// Transformer layers of a model (num_layers, --layers): the deepest released models have ~130;
// the simulator and the planners keep per-layer state for each.
inline constexpr int64_t kMaxLayers = 1024;
// Routed experts per MoE layer (moe.num_experts, --experts): released models have at most a few
// hundred; the simulator keeps per-(layer, expert) state.
inline constexpr int64_t kMaxExperts = 4096;
// Accelerators one machine of a node joins (a node preset's count, `<N>x<gpu>`) and machines a
// node spans (its nodes): the largest NVLink domains hold 72; the simulator keeps per-device state.
inline constexpr int64_t kMaxAcceleratorsPerMachine = 1024;
inline constexpr int64_t kMaxMachinesPerNode = 1024;
// Seconds any option or file field gives as a time (--layer-overhead-s, --kernel-launch-s,
// latency_s, a profile's storage times): 1e6 s is 11.6 days, far beyond any operator or read, and
// keeps every sum of them printable.
inline constexpr double kMaxSeconds = 1e6;

// `value` as a count in [minimum, maximum]; else Error "NAME VALUE: must be ... (WHY)". `name` is
// the option or field as the user wrote it ("--offload-readers", "config.json: num_hidden_layers").
int64_t CheckCount(int64_t value, int64_t minimum, int64_t maximum, const std::string& name,
                   const std::string& why);

// `value` as seconds: finite, >= 0 and at most kMaxSeconds; else Error naming `name`.
double CheckSeconds(double value, const std::string& name);

}  // namespace moelab::base
