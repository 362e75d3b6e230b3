#pragma once

#include <string>

#include "cli/options.h"
#include "policies/registry.h"

namespace moelab::cli {

// One flag per option a registered offload policy declares (policies/registry.h), stored into
// `target` on parse: run --offload and sim offload take the same flags from the same declarations.
void AddPolicyOptions(po::options_description& options, policies::PolicyOptions& target);

// " --cache-per-layer N --staging-buffers N ...": the usage line's policy flags.
std::string PolicyOptionsUsage();

// Throws naming the first policy flag given, with `why` ("it applies with --offload POLICY only").
void RefuseUnusedPolicyOptions(const po::variables_map& values, const std::string& why);

}  // namespace moelab::cli
