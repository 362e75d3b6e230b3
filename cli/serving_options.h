#pragma once

#include "cli/options.h"
#include "scheduler/scheduler_config.h"

namespace moelab::cli {

// The serving scheduler's options (--kv-blocks, --kv-block-tokens, --max-running,
// --max-batched-tokens, --prefill-chunk, --max-waiting, --max-sequence-tokens, --queue-order),
// each bound to its SchedulerConfig field, whose value is the default (set the fields before
// calling). SchedulerConfig::Validate names the option of a bad value.
void AddSchedulerOptions(po::options_description& options, scheduler::SchedulerConfig& config);

}  // namespace moelab::cli
