#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "policies/offload_policy.h"
#include "policies/semantic_embedding.h"

namespace moelab::policies {

// The simulator's stand-ins for what only a real model's gate gives (sim/README.md, "Calibration
// and the gate's stand-ins"): our routing sources choose experts but have no softmax and no
// hidden state, so the gate's probabilities and the speculative gate are modelled from the
// routing and its calibration sample. The executor would read its real router instead. They live
// here, beside the calibration they read, so every engine that drives the policies may use them.
// The seeded semantic embedding of a request is SemanticEmbedding (semantic_embedding.h).

// A layer's gate probabilities for a pass: (1 - m) x counts / (K x tokens) + m x popularity
// shares. `counts` has E entries; `out` is resized to E and sums to 1.
void GateProbabilities(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k,
                       const std::vector<double>& popularity_row, double residual_mass,
                       std::vector<float>& out);

// A routed layer ([token][k] experts) as tokens per expert (`counts`, E entries) and the demand
// a policy sees (activated experts in ascending order with their tokens).
void CountDemand(const std::vector<std::vector<int32_t>>& routed, int64_t experts,
                 std::vector<int64_t>& counts, std::vector<ExpertDemand>& demand);

// The speculative gate: the score of expert e' at the next layer = sum over the demand's experts
// e (weighted by their tokens) of transition[e * E + e'] (P(e' used next | e used), from the
// calibration sample). `out` is resized to E.
void SpeculativeNextLayerScores(const std::vector<float>& transition,
                                std::span<const ExpertDemand> demand, int64_t experts,
                                std::vector<float>& out);

// The speculative gate at a given recall: `out` (the co-occurrence scores above, E values) is
// re-ranked so that each expert of `next_demand` (the next layer's actual routing) comes first
// with probability `recall`, decided by a hash of (seed, pass, layer, expert); ties among them by
// tokens. The rest keep their stand-in order below them.
void ApplySpeculativeRecall(double recall, uint64_t seed, int64_t pass, int64_t layer,
                            std::span<const ExpertDemand> next_demand, std::vector<float>& out);

}  // namespace moelab::policies
