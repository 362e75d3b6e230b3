#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "executor/offload/expert_reader.h"
#include "executor/weights.h"
#include "model/fiddler.h"

namespace moelab::executor::offload {

// The two tiers the offload runtime moves routed experts between, and the fast tier's buffers:
// storage -> RAM on a CPU-only machine (StorageTier), pinned host memory -> device memory on a GPU
// (executor/gpu/gpu_expert_tier.h). The runtime (offload_runtime.h) makes every decision with the
// simulator's policy objects and tells the tier what to move; the tier moves it.
class ExpertTier {
 public:
  struct Copy {
    int32_t layer = 0, expert = 0;  // MoE layer
    int32_t buffer = 0;             // destination (AddBuffer's index)
    int priority_class = 0;         // 0 demand, 1 prefetch
    double priority = 0;            // higher first within the class
    int64_t after = -1;             // a copy that must finish first (the buffer's last), or -1
  };

  virtual ~ExpertTier() = default;
  virtual int64_t expert_bytes() const = 0;      // bytes one expert occupies in the fast tier
  virtual int32_t AddBuffer() = 0;               // one more fast-tier buffer; returns its index
  virtual int64_t Submit(const Copy& copy) = 0;  // queues it; returns its id (from 0)
  // The computation may use the copy's buffer after this (a CPU blocks until it landed; a GPU's
  // compute stream waits for it on the device). Rethrows a failed copy (checksum, I/O).
  virtual void Wait(int64_t copy) = 0;
  virtual bool Done(int64_t copy) = 0;
  // Blocks the host until the copy landed, without counting it as a stall (initial placement).
  virtual void Finish(int64_t copy) = 0;
  // The computation no longer needs `buffer` (a GPU records where its compute stream is, so the
  // next copy into the buffer waits for it).
  virtual void Released(int32_t buffer) = 0;
  // The weights of `buffer` for the host's kernels; nullptr where the fast tier is a device's.
  virtual const FfnWeights* HostWeights(int32_t buffer) const = 0;
  // Seconds the computation stood waiting for copies so far (up to the last PassEnded).
  virtual double stall_s() const = 0;
  // The forward pass ended (its work is complete): a GPU reads its stall events here.
  virtual void PassEnded() {}
  // Bytes one copy moves from the slow tier (a storage block includes its alignment padding).
  virtual double bytes_per_copy() const = 0;
  // Since the tier started (initial placement included): the seconds during which at least one
  // copy was in flight and the copies finished, where the tier measures them; the finished
  // copies' bytes over the busy time is the bandwidth the copies got. The storage tier measures it
  // (ExpertReader::busy_s and reads); a device's copy stream does not yet.
  struct CopyTiming {
    double busy_s = 0;
    int64_t copies_done = 0;
    ExpertReader::Spans spans;  // where each copy's time went (ExpertReader::spans)
  };
  virtual std::optional<CopyTiming> copy_timing() const { return std::nullopt; }
  // Whether a second compute device sits next to the fast tier and can run an expert from the
  // slow tier's copy (the CPU beside a GPU: Fiddler's "run on the CPU", static-split's CPU
  // layers). Without one, such a decision reads the expert into a transient buffer and runs it.
  virtual bool has_host_compute() const = 0;
  virtual std::string slow_tier_path() const = 0;  // reported as offload.store.path
  virtual bool direct_io() const = 0;
  virtual std::string warning() const = 0;
};

}  // namespace moelab::executor::offload
