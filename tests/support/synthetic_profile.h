#pragma once

// A moelab.profile/1 document whose GEMM samples follow a planted roofline exactly (times
// optionally scaled per sample by `noise`), with measured limits: the input of the cost
// calibration tests (fit/ and the CLI).

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace moelab::testing {

struct PlantedRoofline {
  double peak_flops = 8e11;
  double bandwidth_bytes_per_s = 4e10;
  double compute_efficiency = 0.55;
  double memory_efficiency = 0.85;
  double kernel_launch_s = 3e-6;
};

// One sample per operator (expert_ffn, router, lm_head) and token count in 1..4096, plus one
// attention_decode sample the calibration must ignore. `noise` returns the factor applied to each
// time (1 for exact data).
inline nlohmann::json SyntheticProfile(
    const PlantedRoofline& truth, const std::function<double()>& noise = [] { return 1.0; }) {
  auto sample = [&](const std::string& op, int64_t tokens, double weights) {
    const double flops = 2.0 * weights * static_cast<double>(tokens);
    const double bytes = 2.0 * weights;
    const double time = truth.kernel_launch_s +
                        std::max(flops / (truth.peak_flops * truth.compute_efficiency),
                                 bytes / (truth.bandwidth_bytes_per_s * truth.memory_efficiency));
    return nlohmann::json{{"operator", op},
                          {"device", "cpu"},
                          {"shape", nlohmann::json::object()},
                          {"tokens", tokens},
                          {"median_s", time * noise()},
                          {"flops", flops},
                          {"bytes", bytes}};
  };
  nlohmann::json samples = nlohmann::json::array();
  for (int64_t tokens : {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096}) {
    samples.push_back(sample("expert_ffn", tokens, 3.0 * 3584 * 1024));
    samples.push_back(sample("router", tokens, 8.0 * 1024));
    samples.push_back(sample("lm_head", tokens, 32000.0 * 1024));
  }
  samples.push_back({{"operator", "attention_decode"},
                     {"device", "cpu"},
                     {"shape", {{"context", 128}}},
                     {"tokens", 1},
                     {"median_s", 1.0},
                     {"flops", 1.0},
                     {"bytes", 1.0}});
  nlohmann::json machine = {{"cpu", "Test CPU"}, {"threads", 2}, {"memory_bytes", 24e9}};
  machine["limits"] = {{"dram_read_bytes_per_s", truth.bandwidth_bytes_per_s},
                       {"peak_flops", {{"bf16", truth.peak_flops}}},
                       {"threads", 2}};
  return {{"schema", "moelab.profile/1"}, {"machine", machine}, {"samples", samples}};
}

}  // namespace moelab::testing
