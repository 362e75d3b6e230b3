#pragma once

#include <optional>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "executor/executor_config.h"

namespace moelab::validate::impl {

// What a reused `--profile` measured, read from its JSON (moelab.profile/1), and validate's
// refusals of a profile that measured other code than the executor runs.

// The kernel path the profile recorded in machine.`field` ("isa", "quantized_kernel"); nullopt
// where the profile does not record it.
std::optional<std::string> ProfiledKernelPath(const nlohmann::json& profile,
                                              const std::string& field);

// The weight format the profile measured `part` ("expert", "attention") on:
// model.shape.`part`_format, "bf16" for profiles without the field (they were taken on bf16).
std::string ProfiledWeightFormat(const nlohmann::json& profile, const std::string& part);

// The operators the profile measured on cuda:0.
std::set<std::string> ProfiledGpuOperators(const nlohmann::json& profile);

// A reused profile must have measured the code the executor runs: the same kernel path
// (machine.isa; machine.quantized_kernel where recorded) and the same weight formats. Otherwise
// its curves price other kernels or other bytes. Error naming the field and `path`.
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
