#pragma once

#include <string>

#include "executor/run_result.h"

namespace moelab::executor {

// `moelab run`'s text: the summary of a run (RunWorkload's result): TTFT, TPOT, tokens/s, weight
// bytes and bandwidth, time per operator, the SD figures and the offload figures when present.
std::string RunReportText(const RunResult& result);

}  // namespace moelab::executor
