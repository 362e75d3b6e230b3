#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "model/expert_activation.h"
#include "routing/independent_tokens.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"
#include "routing/routing_trace.h"

namespace moelab::routing {

// Distinct experts per pass measured on recorded or generated routing instead of the uniform
// formula. The routing is held as segments: runs of consecutive tokens of one sequence, each
// token's K experts per MoE layer as a bit set, labelled with the kind of pass they came from.
// A pass of B sequences x L tokens is estimated by drawing B segments of the pass's kind (of at
// least L tokens, at a random offset; B different segments when the pool has B, since a batch is B
// different sequences: a segment drawn twice would share all its experts with itself) and
// counting the union of their experts per layer, averaged over layers and over kSamples seeded
// draws. Tokens of different sequences are thus taken as independent (and, for the
// tokens-per-expert spread, each token counted on the experts it routes to), while the tokens of
// one sequence keep whatever they share (drafts that route alike, temporal locality) and every
// layer keeps its popularity skew.
//
// A pass of single tokens (L = 1: every decode pass, and the serving simulator's iterations,
// which price their T tokens as T sequences of one token) is not drawn: its expectation under
// this very model has an exact form (routing/independent_tokens.h), so DistinctExperts(B, 1) is
// that expectation, without sampling error, and Load(B, 1) too once B exceeds the pool (Binomial
// per expert). Load(B <= pool, 1), a pool too large for the exact table (independent_tokens.h's
// kMaxTableWork) and every L > 1 (a sequence's consecutive tokens share experts in whatever way
// the segment at the drawn offset does) are still estimated by the kSamples draws.
//
// Which segments a kind draws from: its own, else the nearest there are (verify <-> decode, then
// prefill). When no segment is L tokens long, a sequence's L tokens are made of several
// segments (fewer shared experts than a real run would show: an upper estimate).
class SampledExpertActivation : public model::ExpertActivation {
 public:
  static constexpr int kSamples = 256;

  struct Segment {
    model::PassKind kind = model::PassKind::kDecode;
    int64_t tokens = 0;
    std::vector<uint64_t> experts;  // [token][layer][word]: bit e set when the token routes to e
  };

  SampledExpertActivation(std::string description, int64_t num_layers, int64_t num_experts,
                          int64_t top_k, std::vector<Segment> segments, uint64_t seed);

  // A recorded trace (`moelab run --trace-out`): each step's sequences (RoutingStep::
  // sequence_tokens; a step without them is one sequence, or one token per sequence for "decode")
  // become segments of its kind ("prefill", "verify", else decode), consecutive decode steps of
  // the same batch joined per sequence. Error (naming `origin`) when the trace has no token.
  static std::unique_ptr<SampledExpertActivation> FromTrace(const RoutingTrace& trace,
                                                            const std::string& origin,
                                                            uint64_t seed);
  // `sequences` streams of `positions` decode tokens from a synthetic source (token i of step s
  // is sequence i at position s, as the correlated source defines "previous token").
  static std::unique_ptr<SampledExpertActivation> FromSource(RoutingSource& source,
                                                             const std::string& description,
                                                             int64_t num_layers,
                                                             int64_t num_experts, int64_t top_k,
                                                             uint64_t seed, int64_t sequences = 64,
                                                             int64_t positions = 64);

  std::string Describe() const override { return description_; }
  int64_t num_experts() const override { return num_experts_; }
  int64_t top_k() const override { return top_k_; }
  double DistinctExperts(int64_t batch, int64_t tokens_per_sequence,
                         model::PassKind kind) const override;
  // Each draw's tokens counted per (layer, expert); the spread averaged over layers and draws.
  model::ExpertLoad Load(int64_t batch, int64_t tokens_per_sequence,
                         model::PassKind kind) const override;

  // The kSamples-draw estimates whatever the shape (what DistinctExperts and Load return where no
  // exact form is used): the cross-check of the exact single-token forms.
  double DrawnDistinctExperts(int64_t batch, int64_t tokens_per_sequence,
                              model::PassKind kind) const {
    return Estimated(batch, tokens_per_sequence, kind).distinct;
  }
  model::ExpertLoad DrawnLoad(int64_t batch, int64_t tokens_per_sequence,
                              model::PassKind kind) const {
    return Estimated(batch, tokens_per_sequence, kind).load;
  }

  int64_t segments(model::PassKind kind) const;  // how many segments of this kind are held

 private:
  struct Estimate {
    double distinct = 0;
    model::ExpertLoad load;
  };
  const std::vector<const Segment*>& Pool(model::PassKind kind) const;
  const Estimate& Estimated(int64_t batch, int64_t tokens_per_sequence, model::PassKind kind) const;
  // The exact single-token expectations of a kind's pool (built on first use).
  const IndependentTokenDraws& SingleTokens(model::PassKind kind) const;

  std::string description_;
  int64_t num_layers_, num_experts_, top_k_, words_;
  std::vector<Segment> segments_;
  std::map<model::PassKind, std::vector<const Segment*>> pools_;
  uint64_t seed_;
  mutable std::mutex mutex_;
  mutable std::map<std::tuple<int64_t, int64_t, model::PassKind>, Estimate> memo_;
  mutable std::map<const std::vector<const Segment*>*, std::unique_ptr<IndependentTokenDraws>>
      single_tokens_;
};

// The activation a --routing value describes for a model of `num_layers` MoE layers, E experts,
// top-K: uniform -> the closed form; trace:FILE -> the recorded routing (its E and K must be the
// model's; its layer count may differ); popularity:FILE and correlated... -> sampled from the
// synthetic source. Error for "gate" (a prediction has no gate to run: record one with `moelab
// run --trace-out` and pass trace:FILE).
std::unique_ptr<model::ExpertActivation> MakeExpertActivation(const RoutingSpec& spec,
                                                              int64_t num_layers,
                                                              int64_t num_experts, int64_t top_k,
                                                              uint64_t seed);

}  // namespace moelab::routing
