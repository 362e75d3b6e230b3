#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::validate {

// A note for each case round whose machine-limit probe (profiler::MeasureMachineLimits: DRAM read
// bandwidth, and the peak FLOP/s of every data type it measured) read below `fraction` of the
// rounds' median: that round's cases ran on a slower machine than the others. On the 2-vCPU
// guests of 2026-12-07/08 one round's bf16 peak read half the others' in 16 of 33 quick
// validations, as if both vCPUs shared one core for a while, and the compute-bound cases of such
// runs missed most (a q8_0 run's prefills 20-30 % under). Fewer than 3 rounds: no median, none.
std::vector<std::string> SlowRoundNotes(const std::vector<nlohmann::json>& round_limits,
                                        double fraction = 0.75);

}  // namespace moelab::validate
