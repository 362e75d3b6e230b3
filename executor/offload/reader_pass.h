#pragma once

#include <functional>

#include "executor/offload/expert_reader.h"
#include "executor/offload/expert_store.h"

namespace moelab::executor::offload {

// The executor's reader as a run drives it, timed over one pass of `store`: a reader of `kind`
// with `reads_in_flight` made afresh, every expert's read queued at once in store order, into
// destinations (the store's expert shape, allocated afresh for the pass, untimed) rotating over
// twice the reads in flight, a read waiting for its destination's previous one. The pass's wall
// seconds, from the first submit to the last read's end. `compute_step`, when given, runs back
// to back on another thread for the whole pass, which starts once the first step has (the host
// computing while the reader reads: on a
// CPU-only machine the reader's checksum and copy share the cores and the memory bus with it);
// it must return within a few milliseconds, since the pass waits for the step in flight, and must
// not throw (it runs on its own thread).
//
// The profiler's expert_reader operator and validate --cases offload both time the reader with
// this, so the bandwidth a profile prices reads at and the one validate measures beside its runs
// are the same measurement. Errors: the reader's (a failed or short read, a checksum mismatch).
double ReaderPassSeconds(const ExpertStore& store, ReaderKind kind, int reads_in_flight,
                         const std::function<void()>& compute_step = {});

// The same pass, and with a computation beside it, what the reads cost the computation.
struct ReaderPassTiming {
  double seconds = 0;  // the pass, as ReaderPassSeconds
  // The computation's rate during the pass as a fraction of its rate alone: the steps that ended
  // inside the pass, against the same number of steps timed alone right after it (the reader's
  // threads gone). 0 without a computation, or when fewer than two steps ended inside the pass.
  double compute_rate = 0;
  int64_t compute_steps = 0;  // steps between the first and the last that ended inside the pass
};
ReaderPassTiming TimeReaderPass(const ExpertStore& store, ReaderKind kind, int reads_in_flight,
                                const std::function<void()>& compute_step = {});

}  // namespace moelab::executor::offload
