#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/fiddler.h"
#include "routing/routing_spec.h"
#include "routing/routing_trace.h"

namespace moelab::routing {

// Where routing decisions come from when they are not the model's own gate. The executor and the
// simulator both call Route, so given the same source they run the very same expert routing.
//
// Every implementation here is a pure function of (configuration, step, layer, token): results do
// not depend on call order, on how many tokens are routed at once (routing tokens 0..9 gives the
// same first five as routing tokens 0..4), or on which thread calls; concurrent calls with
// distinct `out` are safe. The only state kept between calls is a cache of exact results (the
// correlated source memoizes the last step routed at each layer), which changes speed, never
// results.
class RoutingSource {
 public:
  virtual ~RoutingSource() = default;
  virtual std::string Describe() const = 0;
  // Route `tokens` tokens of step `step` at MoE layer `layer`; out is resized to [tokens][top_k],
  // K distinct experts each, in rank order. Error for a negative step, a layer outside
  // [0, num_layers) or negative tokens.
  virtual void Route(int64_t step, int64_t layer, int64_t tokens,
                     std::vector<std::vector<int32_t>>& out) = 0;
  // What Route would write, read in place where the source keeps it (a replayed trace: the
  // simulator's hot loop skips a copy of every token's experts); nullptr where the source computes
  // it (call Route). Same errors as Route. Valid until the source is changed or destroyed.
  virtual const std::vector<std::vector<int32_t>>* Stored(int64_t /*step*/, int64_t /*layer*/,
                                                          int64_t /*tokens*/) {
    return nullptr;
  }
};

// Uniform: each token picks K distinct experts uniformly at random (every ordered K-tuple equally
// likely). Deterministic per (seed, step, layer, token): a counter-based splitmix64 hash of the
// tuple, not one shared stream. Error unless num_layers >= 1 and 1 <= top_k <= num_experts.
std::unique_ptr<RoutingSource> MakeUniformRouting(int64_t num_layers, int64_t num_experts,
                                                  int64_t top_k, uint64_t seed);

// Popularity: per layer, K distinct experts sampled without replacement with probability
// proportional to the layer's counts (successive draws: the first with probability c_i / sum c,
// the next among the remaining experts, and so on; the draw order is the rank order). Experts with
// zero counts are never chosen. Note that without replacement flattens the skew a little: an
// expert's share of the K * tokens activations is slightly below its table share when it is above
// average (for Mixtral's table, K = 2, by at most 0.0045). Weights are fixed-point integers, so
// results are identical on every platform. Error if the table's layers/experts don't match the
// model (naming both), or if a layer has fewer than K experts with nonzero counts; `origin` names
// the table in errors and in Describe().
std::unique_ptr<RoutingSource> MakePopularityRouting(
    const model::PopularityTable& table, int64_t num_layers, int64_t num_experts, int64_t top_k,
    uint64_t seed, const std::string& origin = "popularity table");

// Replays a recorded trace step by step. Error (naming the trace: `origin`, or its `source` when
// empty) when the trace is invalid, when its layers/E/K differ from the model, or when asked for a
// step, layer or token count the trace does not have (the token count must equal the step's).
std::unique_ptr<RoutingSource> MakeTraceRouting(RoutingTrace trace, int64_t num_layers,
                                                int64_t num_experts, int64_t top_k,
                                                const std::string& origin = "");

// Popularity counts as fixed-point integer weights per layer (the largest count of a layer maps to
// 2^scale_bits, a nonzero count never rounds to zero), so weighted draws are identical on every
// platform. Error (naming `origin`) for negative or non-finite counts, or a layer with fewer than
// top_k experts of nonzero count.
struct FixedPointPopularity {
  std::vector<std::vector<uint64_t>> weights;  // [layer][expert]
  std::vector<uint64_t> totals;                // [layer]
};
FixedPointPopularity ToFixedPointPopularity(const model::PopularityTable& table,
                                            int64_t num_experts, int64_t top_k,
                                            const std::string& origin);

// The source a parsed --routing value names (routing/routing_spec.h): nullptr for "gate" (the
// model's own router); loads the popularity table or the trace (errors name the file). `seed`
// is used by the synthetic sources.
std::unique_ptr<RoutingSource> MakeRoutingSource(const RoutingSpec& spec, int64_t num_layers,
                                                 int64_t num_experts, int64_t top_k, uint64_t seed);
// The same from the text: ParseRoutingSpec, then the above.
std::unique_ptr<RoutingSource> MakeRoutingSource(const std::string& spec, int64_t num_layers,
                                                 int64_t num_experts, int64_t top_k, uint64_t seed);

}  // namespace moelab::routing
