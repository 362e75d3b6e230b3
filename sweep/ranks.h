#pragma once

#include <vector>

#include "parallel/communicator.h"
#include "sweep/engine.h"

namespace moelab::sweep {

// How long a rank that finished its share waits at the gather for the others (docs/limits.md):
// shares end at different times (a `plan capacity` point takes minutes), so the collectives'
// default 120 s would end a healthy sweep; a rank that dies is noticed by mpirun itself, which
// ends the job.
inline constexpr double kSweepGatherTimeoutS = 24 * 3600.0;

// Runs the sweep over the communicator's ranks: rank r takes points r, r + K, ... (interleaved,
// so a grid whose cost grows along an option is shared evenly), formats its rows, and rank 0
// gathers every rank's outcomes (only rank 0 writes them). Returns them in grid order on rank 0,
// an empty vector on the others. Throws parallel::AgreedError on every rank when the ranks read
// different specs or a point failed: on rank 0 with the lowest failed point's message (as one
// process gives), on the others saying rank 0 reports it.
// Each rank runs its share on `threads` threads (RunPoints).
std::vector<PointOutcome> RunOnRanks(const SweepSpec& spec, const PointRunner& run,
                                     parallel::Communicator& communicator, const Progress& progress,
                                     RowFormats formats = {}, int threads = 1);

}  // namespace moelab::sweep
