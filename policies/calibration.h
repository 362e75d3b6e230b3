#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/fiddler.h"
#include "policies/offload_policy.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"
#include "policies/gate_standins.h"

namespace moelab::policies {

// What the policies may learn about routing before the run (their "calibration data"), and the
// simulator's stand-ins for quantities only a real model has (gate probabilities, the
// speculative gate). Everything is estimated from a calibration sample of the same routing
// source with a different seed (a fresh draw, as Fiddler profiles on other data than it serves),
// or, for a recorded trace, from the trace itself (in-sample: optimistic, said in the output).
struct CalibrationOptions {
  int64_t tokens = 2048;            // routed tokens in the sample
  int64_t tokens_per_request = 16;  // the sample is cut into requests of this many tokens
  int64_t semantic_dim = 16;        // dimension of the seeded per-request embeddings
  // The gate's probability mass outside the chosen experts, spread like the layer's popularity:
  // expert-map rows are (1 - m) x routed shares + m x popularity (an assumption: our routing
  // sources pick experts but have no softmax; 0.3 keeps top-K ahead of every other expert).
  double gate_residual_mass = 0.3;
  int64_t max_history = 1024;  // expert maps handed to fMoE
  // The option the routing came from, as messages name it (run: "--offload-calibration").
  std::string option = "--routing";

  void Validate() const;  // Error naming the field
};

struct RoutingCalibration {
  std::string source;      // what was sampled
  bool in_sample = false;  // true for a replayed trace
  int64_t tokens = 0;
  model::PopularityTable popularity;  // [layer][expert]: tokens routed (Fiddler's popularity)
  // [layer][e * E + e2]: P(expert e2 is used at layer+1 | expert e is used at layer), smoothed
  // towards layer+1's popularity by one pseudo-count; layers 0..L-2. The speculative gate.
  std::vector<std::vector<float>> transition;
  std::vector<OffloadSetup::ExpertMap> history;  // per sampled token, for fMoE
};

// Samples the routing `spec` names with a seed derived from `seed`; a trace is read directly
// (in-sample). Errors are those of MakeRoutingSource / LoadRoutingTrace; "gate" is refused.
RoutingCalibration CalibrateRouting(const routing::RoutingSpec& spec, int64_t num_layers,
                                    int64_t num_experts, int64_t top_k, uint64_t seed,
                                    const CalibrationOptions& options);
// The same from a --routing value (ParseRoutingSpec).
RoutingCalibration CalibrateRouting(const std::string& spec, int64_t num_layers,
                                    int64_t num_experts, int64_t top_k, uint64_t seed,
                                    const CalibrationOptions& options);

}  // namespace moelab::policies
