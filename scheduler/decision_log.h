#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/scheduler.h"

namespace moelab::scheduler {

// What a serving engine or simulator decided, iteration by iteration, in one schema
// (`moelab.serving_decisions/1`): `moelab serve --decisions-out` and `moelab sim serve
// --decisions-out` write the same file, so the two diff decision by decision.
//
// {"schema": "moelab.serving_decisions/1", "scheduler": SchedulerConfig::ToJson(),
//  "iterations": [{"iteration", "batch": [{"id", "phase": "prefill"|"decode", "tokens",
//  "context_tokens", "emits_token"}], "preempted": [ids], "admitted": [ids], "swapped_out",
//  "swapped_in", "kv_blocks_used", "waiting"}]}. Plans with an empty batch and no decision are
// left out: an engine idles for arrivals where a simulator jumps to them.
inline constexpr const char* kDecisionsSchema = "moelab.serving_decisions/1";

nlohmann::json DecisionLogToJson(const SchedulerConfig& config,
                                 const std::vector<IterationPlan>& plans);

// The plans of a decision log read back; errors name `origin` and the field.
std::vector<IterationPlan> DecisionLogFromJson(const nlohmann::json& log,
                                               const std::string& origin);

// "" when `a` and `b` hold the same decisions; else the first difference in words
// ("iteration 12: batch entry 3: a: request 7 decode 1 tokens at 130; b: request 8 ...").
std::string FirstDifference(const std::vector<IterationPlan>& a,
                            const std::vector<IterationPlan>& b);

}  // namespace moelab::scheduler
