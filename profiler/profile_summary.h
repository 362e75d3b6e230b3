#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moelab::profiler {

// `moelab profile`'s text: one line per operator family and device of a moelab.profile/1 document
// (points, the x-axis range: tokens; batch and context for decode attention,
// and queries per sequence for verify attention; bytes for transfers;
// fastest and slowest median), its notes, and the file it was written to.
std::string ProfileSummaryText(const nlohmann::json& profile, const std::string& out);

}  // namespace moelab::profiler
