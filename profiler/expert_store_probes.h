#pragma once

#include "executor/executor_config.h"
#include "executor/offload/expert_store.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"

namespace moelab::profiler {

// Probes of how fast an offload expert store (executor/offload/expert_store.h) reads on this
// machine, each timed on the spot (not Google Benchmark points of a profile): validate --cases
// offload runs them between its cases, so the bandwidth the simulator is given is measured in the
// same minutes as the runs it prices.

// The plain probe's least duration: reads go on until every expert was read once and this much
// time has passed.
inline constexpr double kStoreReadProbeSeconds = 0.5;

// The plain probe: the store's experts read in order, pass after pass, for at least
// kStoreReadProbeSeconds, by `readers` threads each doing what a reader thread of the executor
// does (ExpertStore::Read: an O_DIRECT pread of the block, buffered when O_DIRECT was refused,
// then the checksum and the copy into an expert's buffers of `config`'s shape): experts / wall
// time, in bytes. The reader's pipeline, not the bare disk: while a thread checksums, its next
// read is not issued, and the cloud disk here delivers less with one read in flight than with
// two. Bare preads of one pass (a tenth of a second) read 1.25-2.1 GB/s across six validations
// while their stream-all decodes (288 reads each) got 1.52-1.85 GB/s, and the decode predictions
// followed the probe (-10 % to +26 %). Errors: the store's (they name the file and the expert).
double ProbeStorageReadBandwidth(const executor::offload::ExpertStore& store,
                                 const executor::ExecutorConfig& config, int readers);

// The bare-pread probe's duration.
inline constexpr double kBarePreadSeconds = 0.25;

// The disk alone, by reads in flight: `in_flight` threads each pread the store's blocks back to
// back (O_DIRECT where the store has it; no checksum, no copy) for at least kBarePreadSeconds;
// blocks / wall time, in bytes. validate reports it beside the reader's probe: the simulator
// shares that bandwidth equally between the reads in flight (two issued together both land at
// twice a read's time), while the executor's timelines show this disk serving them one after the
// other.
double ProbeBarePreads(const executor::offload::ExpertStore& store, int in_flight);

// The executor's reader as a run drives it (executor/offload/reader_pass.h: the default reader
// kind and reads in flight, one pass over the store), alone or while `pool` runs the LM head
// matrix-vector product of `weights` (decode's largest operator) back to back; experts read /
// wall time, in bytes. Why the reader itself and not a loop of ExpertStore::Read as the plain
// probe: inside validate the reader read 0.78x that loop (414 interleaved triples, 2026-11-29),
// and beside computation 0.82x what it read alone. The profile's expert_reader operator times the
// same pass, so a profile prices reads the way this does.
struct ReaderProbe {
  double bytes_per_s = 0;
  double compute_rate = 0;  // beside computation: TimeReaderPass's (0: not measured)
};
ReaderProbe ProbeReaderPass(const executor::offload::ExpertStore& store,
                            const executor::ModelWeights& weights, kernels::ThreadPool& pool,
                            bool beside_compute);

}  // namespace moelab::profiler
