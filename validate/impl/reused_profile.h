#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/executor_config.h"

namespace moelab::validate::impl {

// Validate's refusals of a reused `--profile` (moelab.profile/1) that measured other code than the
// executor runs; what it measured is model::ProfiledModel's to read.

// The operators the profile measured on cuda:0.
std::set<std::string> ProfiledGpuOperators(const nlohmann::json& profile);

// A reused profile must have measured the code the executor runs: the same kernel path
// (machine.isa; machine.quantized_kernel where recorded) and the same weight formats. Otherwise
// its curves price other kernels or other bytes. Error: model::ProfiledModel::Require's.
void RequireProfiledFormats(const nlohmann::json& profile, const std::string& path,
                            const executor::ExecutorConfig& target);

// --device gpu with a reused --profile: it must have measured the operators the fitted source
// prices on cuda:0, refused before any case runs rather than at the fit after all of them.
void RequireGpuSamples(const nlohmann::json& profile, const std::string& path);

// The profile at `path`, parsed and validated (profiler::ValidateProfile), and refused unless it
// measured what the executor runs for `target` (RequireProfiledFormats).
nlohmann::json ReadReusedProfile(const std::string& path, const executor::ExecutorConfig& target);

// --device gpu with the reused profile at `path`: parsed, validated and RequireGpuSamples.
void RequireReusedGpuProfile(const std::string& path);

}  // namespace moelab::validate::impl
