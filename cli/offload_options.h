#pragma once

#include <string>

#include "cli/options.h"
#include "executor/offload/offload_runtime.h"
#include "executor/run_workload.h"

namespace moelab::cli {

// The offload flags `moelab run` and `moelab serve` share: --offload POLICY, --expert-memory,
// --offload-dir, --offload-readers, --offload-reader, --offload-calibration and every policy's own
// options (policy_options.h), parsed into OffloadOptions.
struct OffloadFlags {
  executor::offload::OffloadOptions offload;
  std::string calibration;  // --offload-calibration
};

void AddOffloadOptions(po::options_description& options, OffloadFlags& flags);

// After parsing: --offload POLICY and its flags into `request.offload` (the calibration sampled
// for request's model, shape and seed), or, without --offload, any of its flags refused by name.
void ApplyOffloadFlags(const po::variables_map& values, OffloadFlags& flags,
                       executor::RunRequest& request);

}  // namespace moelab::cli
