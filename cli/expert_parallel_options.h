#pragma once

#include <string>

#include "cli/options.h"
#include "cli/output.h"
#include "executor/expert_parallel_run.h"
#include "executor/run_workload.h"

namespace moelab::cli {

// `moelab run`'s expert-parallel block: --expert-parallel R, --attention, --placement FILE,
// --ep-chunks N|auto.
struct ExpertParallelFlags {
  executor::ExpertParallelOptions options;
};
void AddExpertParallelOptions(po::options_description& options, ExpertParallelFlags& flags);
// Whether --expert-parallel was given; its companions without it are refused by name.
bool ExpertParallelRequested(const po::variables_map& values);
// With --expert-parallel R and data-parallel attention, a --batch left at its default becomes R
// (one sequence per rank): `mpirun -n 2 moelab run --expert-parallel 2` runs as given instead of
// refusing the default batch of 1. A --batch given is kept (and refused below R, by name).
void DefaultBatchForExpertParallel(const po::variables_map& values,
                                   const ExpertParallelFlags& flags, executor::RunRequest& request);

// Runs the request across the MPI ranks that started this process and prints the report on rank
// 0 (--out written by rank 0 only). Without mpirun, or in a build without MPI, refused with one
// line. Every rank returns non-zero when any refused (the message printed once, by rank 0); a rank
// whose collective timed out prints its own message and aborts the job so no rank hangs.
int RunAcrossRanks(const executor::RunRequest& request, const ExpertParallelFlags& flags,
                   const OutputRequest& output);

}  // namespace moelab::cli
