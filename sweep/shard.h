#pragma once

#include <string>
#include <vector>

#include "sweep/engine.h"

namespace moelab::sweep {

// A shard of a sweep (`--shard I/N`, one task of a Slurm job array): `moelab.sweep_shard/1` with
// the spec and its hash, the shard's index and count, the points it ran (interleaved: I, I + N,
// ...) and their formatted rows.
std::string ShardJson(const SweepSpec& spec, int64_t index, int64_t count,
                      const std::vector<PointOutcome>& outcomes);

// The shard files of one sweep, checked and put in grid order: the same spec (hash and text) and
// N in every file, each index 0..N-1 exactly once, each shard's points the ones its index takes.
// Errors name the file and what differs or is missing. `commands` and `reserved` as
// ParseSweepSpec.
struct MergedSweep {
  SweepSpec spec;
  std::vector<PointOutcome> outcomes;
};
MergedSweep MergeShards(const std::vector<std::string>& paths,
                        const std::vector<std::string>& commands,
                        const std::vector<std::string>& reserved);

}  // namespace moelab::sweep
