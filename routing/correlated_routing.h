#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/fiddler.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"

namespace moelab::routing {

// Seeded synthetic routing with the two correlations expert offloading lives on
// (routing/README.md, "Correlated routing"):
//
//  - temporal locality: each of a token's K expert slots at a layer reuses, with probability
//    `locality`, the expert of the same slot of the previous token at that layer
//    (Mixtral-offloading observation i: experts are reused between adjacent tokens; what an LRU
//    cache exploits);
//  - inter-layer correlation: otherwise, with probability `layer_correlation`, the slot's expert is
//    pi_l(e), where e is the same slot's expert at the previous MoE layer and pi_l a fixed
//    rank-matching map from layer l-1's experts to layer l's, the same for every seed (observation
//    ii: the hidden state already "knows" the next layer's experts; what a next-layer prefetcher
//    exploits);
//  - otherwise the slot is a fresh draw: K distinct experts by successive sampling from the
//    layer's popularity table (uniform when no table is given), as MakePopularityRouting does.
//
// Either correlation alone is the generator of its kind (locality only: layer_correlation = 0;
// inter-layer only: locality = 0); both 0 is plain uniform/popularity routing.
//
// "Previous token" of token i of step s is token i of step s-1 (decode: the same sequence one
// step earlier), or token i-1 of step 0 (prefill: the previous prompt position). Route stays a
// pure function of (configuration, step, layer, token), as RoutingSource requires: a slot's value
// is found by following its chain of "copied from" links back to a fresh draw (expected length
// 1 / (1 - locality - (1 - locality) * layer_correlation) hops; every uniform used is a hash of
// the coordinates, never shared state). When two slots of a token land on the same expert, the
// later slot takes the token's next fresh expert not yet taken (K distinct experts per token).
// Speed: the source remembers each layer's last routed step (the slots before deduplication), so
// routing step by step and layer by layer (as the simulator and the executor do) follows one link
// per slot instead of a whole chain; any other order walks the chains and gets the same result.
struct CorrelatedRoutingOptions {
  double locality = 0;           // [0, 0.99]: per-slot probability of reusing the previous token's
  double layer_correlation = 0;  // [0, 1]: per-slot probability of following the previous layer
  model::PopularityTable popularity;  // [layer][expert] counts for fresh draws; empty = uniform
  std::string popularity_origin;      // names the table in errors and Describe()

  // Error naming the option ("locality", "layer") when out of range.
  void Validate() const;
};

// Error unless num_layers >= 1, 1 <= top_k <= num_experts, options valid and, when a table is
// given, [num_layers][num_experts] with at least top_k nonzero counts per layer.
std::unique_ptr<RoutingSource> MakeCorrelatedRouting(const CorrelatedRoutingOptions& options,
                                                     int64_t num_layers, int64_t num_experts,
                                                     int64_t top_k, uint64_t seed);

// The options a parsed "correlated..." spec names, its popularity table loaded (LoadPopularityTable
// errors name the file).
CorrelatedRoutingOptions CorrelatedOptionsOf(const RoutingSpec& spec);

// Parses the part after "correlated:" of a --routing value (ParseRoutingSpec: comma-separated
// key=value pairs, keys "locality", "layer", "popularity") and loads the table. An empty text
// means all defaults (uniform). Error naming the key for an unknown key, a missing '=' or a value
// that is not a number in range.
CorrelatedRoutingOptions ParseCorrelatedRoutingOptions(const std::string& text);

}  // namespace moelab::routing
