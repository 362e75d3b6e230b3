#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace moelab::executor {

// `moelab run`'s text: the summary of a moelab.run/1 report (RunWorkload's JSON): TTFT, TPOT,
// tokens/s, weight bytes and bandwidth, time per operator, and the SD figures when present.
std::string RunReportText(const nlohmann::json& report);

}  // namespace moelab::executor
