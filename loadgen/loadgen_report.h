#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "loadgen/load_generator.h"

namespace moelab::loadgen {

// moelab loadgen's report: serving::ServingSummaryToJson (moelab.serving/1) plus "source":
// "measured", "url", "model" (null when not sent), "load" {arrivals, prompt_tokens, output_tokens
// (their text forms), seed, requests, duration_s (null without --duration)}, "slo" {ttft_s,
// tpot_s: null when not given}, "concurrency_max", "timeout_s", "late_sends",
// "max_send_lateness_s", "wall_s".
nlohmann::json LoadgenJson(const LoadgenOptions& options, const serving::LoadSpec& load,
                           const serving::ServiceLevelObjectives& slo, const LoadgenResult& result);

// The same report as text: the load, the counts and failures, a p50/p90/p99/mean table of TTFT,
// TPOT, ITL and E2E, throughput and goodput, late sends.
std::string LoadgenText(const nlohmann::json& report);

}  // namespace moelab::loadgen
