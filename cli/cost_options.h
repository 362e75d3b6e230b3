#pragma once

#include "cli/options.h"
#include "fit/cost_source_options.h"
#include "routing/routing_spec.h"

namespace moelab::cli {

// The cost-source options every prediction command takes the same way (fit/cost_source_options.h):
// --hardware (added by the command, with its default), --calibrate, --profiled-hardware, --profile,
// and the analytic parameters --dtype, --compute-efficiency, --memory-efficiency,
// --kernel-launch-s. What --profile does differs by command, and its help says which.
enum class ProfileRole {
  kInsteadOfHardware,  // the fitted profile prices everything (sim sd, plan sd, sim serve)
  kBesideHardware,     // it prices compute; --hardware still gives memory, links, node or price
  kRefused,            // the command compares presets (plan hardware): --calibrate instead
};
void AddCostSourceOptions(po::options_description& options,
                          ProfileRole profile = ProfileRole::kInsteadOfHardware);

// --routing and --routing-seed of the predictions that price routed experts by the distinct
// experts a pass activates (plan sd, sim sd, plan hardware), bound to `spec` (default uniform) and
// `seed` (its value is the default).
void AddPredictionRoutingOptions(po::options_description& options, routing::RoutingSpec& spec,
                                 uint64_t& seed);

// The typed options; `hardware_option` is the command's hardware flag ("hardware").
fit::CostSourceOptions CostSourceOptionsFrom(const po::variables_map& values);

}  // namespace moelab::cli
