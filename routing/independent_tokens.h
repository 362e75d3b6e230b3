#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "model/expert_activation.h"

namespace moelab::routing {

// Exact expectations for a pass of T single tokens drawn from a pool of n routed segments the way
// SampledExpertActivation draws a pass of T sequences x 1 token
// (routing/expert_activation_sampler.h): T different segments while T <= n, else T segments with
// replacement, each at a uniform offset. A drawn token brings its whole set of K distinct experts
// (top-k routes are without replacement within a token), so what matters per (layer, expert) is
// only
//   q_s = share of segment s's tokens routed to the expert,
// and the drawn tokens are independent given their segments. With p_none the probability that no
// drawn token routes to the expert:
//   with replacement (T > n): p_none = (1 - Q)^T, Q = mean_s q_s, and the expert's tokens are
//     Binomial(T, Q);
//   T different segments (T <= n): p_none = E over T-subsets S of prod_{s in S} (1 - q_s)
//     = e_T(1 - q_1, ..., 1 - q_n) / C(n, T) (an elementary symmetric polynomial), computed for
//     every T at once by the convex recurrence g_i[k] = (i - k)/i g_{i-1}[k] + k/i x_i g_{i-1}[k-1]
//     (g = e_k / C(i, k), so no binomial overflows and every step is an average of non-negatives).
// The distinct experts per layer are the sum over experts of 1 - p_none, averaged over layers: the
// quantity SampledExpertActivation's 256 draws estimated, without their sampling error. (Not the
// naive sum_e 1 - (1 - p_e)^T with p_e the per-slot share: a token's K slots are not independent
// draws, and tokens of one segment are not independent of each other; both are kept here.)
class IndependentTokenDraws {
 public:
  // `routed_tokens[(s * num_layers + l) * num_experts + e]`: tokens of segment s routed to expert e
  // at MoE layer l; `segment_tokens[s]` >= 1: the segment's tokens. Error when the shapes do not
  // match, a count is negative or exceeds its segment's tokens.
  IndependentTokenDraws(int64_t num_layers, int64_t num_experts,
                        const std::vector<int64_t>& segment_tokens,
                        const std::vector<int64_t>& routed_tokens);

  int64_t segments() const { return segments_; }
  // Whether a pass of `tokens` tokens draws them from different segments (tokens <= segments).
  bool DrawsDifferentSegments(int64_t tokens) const { return tokens <= segments_; }

  // Mean over layers of the expected distinct experts `tokens` (>= 1) tokens activate. With
  // different segments this needs the all-T table, O(n^2 x layers x experts) once (n = segments);
  // nullopt when that would exceed kMaxTableWork (a pool too large for it: the caller estimates).
  static constexpr double kMaxTableWork = 1 << 28;
  std::optional<double> DistinctExperts(int64_t tokens) const;

  // The expected tokens-per-expert spread with replacement (tokens > segments): each (layer,
  // expert) Binomial(tokens, Q), summed over experts and averaged over layers; terms beyond 12
  // standard deviations of the mean (< 1e-30) left out, as UniformExpertActivation::Load does.
  // Error for tokens <= segments (the Poisson-binomial mixture of different segments is not
  // tabulated: SampledExpertActivation estimates that small case by drawing).
  model::ExpertLoad LoadWithReplacement(int64_t tokens) const;

 private:
  const std::vector<double>& DifferentSegmentsTable() const;

  int64_t num_layers_, num_experts_, segments_;
  std::vector<double> share_;       // [segment][layer][expert]: q_s
  std::vector<double> mean_share_;  // [layer][expert]: Q
  mutable std::once_flag table_once_;
  mutable std::vector<double> distinct_by_tokens_;  // [T], T = 0..n: different segments
};

}  // namespace moelab::routing
