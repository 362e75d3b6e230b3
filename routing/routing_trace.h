#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace moelab::routing {

// The routing trace, schema "moelab.routing_trace/1": which experts every token of every step was
// routed to, at every MoE layer. The executor records one from its gate; the simulator replays it
// (routing/routing_source.h), so both run the very same expert routing. Format: routing/README.md.

inline constexpr char kRoutingTraceSchema[] = "moelab.routing_trace/1";

// One forward step of the whole batch.
// experts[layer][token][k]: the K experts each token of this step was routed to, in the order the
// router ranked them. `layer` counts MoE layers only (0 = the first MoE layer).
struct RoutingStep {
  std::string kind;    // "prefill" | "decode" | "verify" | "draft" ... free-form label, non-empty
  int64_t tokens = 0;  // tokens in this step (all sequences of the batch)
  std::vector<std::vector<std::vector<int32_t>>> experts;  // [layer][token][k]
  // Tokens of each sequence in this step, in batch order (they sum to `tokens`): which tokens are
  // consecutive positions of one sequence. Empty when the recorder did not say (optional field).
  std::vector<int64_t> sequence_tokens;

  bool operator==(const RoutingStep&) const = default;
};

struct RoutingTrace {
  int64_t num_layers = 0, num_experts = 0, top_k = 0;
  std::string
      source;  // e.g. "executor gate, model mixtral-8x7b, seed 1", "synthetic uniform seed 7"
  std::vector<RoutingStep> steps;

  // counts[layer][expert] of one step (tokens routed to each expert). Error when `step` is out of
  // range or the step routes outside [0, num_experts).
  std::vector<std::vector<int64_t>> ExpertCounts(size_t step) const;

  // Every expert index in [0, E), K distinct experts per token, shapes consistent
  // ([num_layers][tokens][top_k]), 1 <= top_k <= num_experts <= 2^20, kind non-empty. The Error
  // names `origin` (a file or a description), the field (e.g. 'steps[3].experts'), layer and token.
  void Validate(const std::string& origin) const;

  bool operator==(const RoutingTrace&) const = default;
};

// The trace as JSON: "schema", "source", "num_layers", "num_experts", "top_k" and "steps", each
// step with "kind", "tokens", "experts" [layer][token][k] and "expert_counts" [layer][expert]
// (redundant, for readers). Validates first.
nlohmann::json RoutingTraceToJson(const RoutingTrace& trace);

// Parses and validates; errors name `origin` and the field, e.g. "trace.json: field
// 'steps[3].experts': layer 2 token 5 routes to expert 9, but num_experts is 8". "expert_counts"
// is optional; when present it must agree with "experts".
RoutingTrace RoutingTraceFromJson(const nlohmann::json& json, const std::string& origin);

RoutingTrace LoadRoutingTrace(const std::string& path);

// Validates, then writes compact JSON (one line per step) to a temporary file in the same folder
// and renames it into place: readers never see a partial trace. Same trace, same bytes.
void SaveRoutingTrace(const RoutingTrace& trace, const std::string& path);

// The bytes SaveRoutingTrace writes (validated first).
std::string RoutingTraceToText(const RoutingTrace& trace);

}  // namespace moelab::routing
