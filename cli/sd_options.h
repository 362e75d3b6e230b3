#pragma once

#include "cli/options.h"
#include "plan/sd_sweep.h"

namespace moelab::cli {

// The sweep plan sd and sim sd both take, bound to `request`: --model, --draft, --hardware,
// --batch, --gamma, --context, --verify. The acceptance options differ per command.
void AddSdSweepOptions(po::options_description& options, plan::SdSweepRequest& request);
// Then the output options, the cost source (read back with CostSourceOptionsFrom) and the
// prediction routing (bound to `request`).
void AddSdSweepSources(po::options_description& options, plan::SdSweepRequest& request);

}  // namespace moelab::cli
