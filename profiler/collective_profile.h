#pragma once

#include <nlohmann/json.hpp>

#include "model/preset_store.h"
#include "parallel/communicator.h"
#include "profiler/collective_bench.h"
#include "profiler/profiler.h"

namespace moelab::profiler {

// `mpirun -n R moelab profile --collectives`: every rank times the collectives at the model's
// message sizes (collective_bench.h), then every rank profiles the operators as `moelab profile`
// does (none with request.operators false), all at once as expert parallelism computes, rank 0's
// kept; ranks done before rank 0 wait without spinning a core (they poll a non-blocking
// all-to-all every 20 ms, for at most `wait_for_rank0_s`), and rank 0 returns
// the profile with the collective samples appended (after the operators' samples), a grid entry
// `collectives` {ranks, tokens_per_rank, repetitions, min_time_s, points} and a note. The other
// ranks return null. Errors every rank raises alike (an unknown model, a bad shape, one rank) are
// parallel::AgreedError.
nlohmann::json RunCollectiveProfile(const ProfileRequest& request, const CollectiveGridSpec& grid,
                                    const model::PresetStore& presets,
                                    parallel::Communicator& communicator,
                                    double wait_for_rank0_s = 4 * 3600.0);

}  // namespace moelab::profiler
