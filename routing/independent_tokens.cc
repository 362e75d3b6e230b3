#include "routing/independent_tokens.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"
#include "base/stats.h"

namespace moelab::routing {

IndependentTokenDraws::IndependentTokenDraws(int64_t num_layers, int64_t num_experts,
                                             const std::vector<int64_t>& segment_tokens,
                                             const std::vector<int64_t>& routed_tokens)
    : num_layers_(num_layers),
      num_experts_(num_experts),
      segments_(static_cast<int64_t>(segment_tokens.size())) {
  const size_t per_segment = static_cast<size_t>(num_layers * num_experts);
  if (num_layers < 1 || num_experts < 1 || segments_ < 1 ||
      routed_tokens.size() != per_segment * segment_tokens.size()) {
    throw base::Error("independent token draws: expected >= 1 segment, layer and expert and " +
                      std::to_string(per_segment) + " routed-token counts per segment, got " +
                      std::to_string(segments_) + " segments, " +
                      std::to_string(routed_tokens.size()) + " counts");
  }
  share_.resize(routed_tokens.size());
  mean_share_.assign(per_segment, 0.0);
  for (size_t s = 0; s < segment_tokens.size(); ++s) {
    const int64_t tokens = segment_tokens[s];
    if (tokens < 1) {
      throw base::Error("independent token draws: segment " + std::to_string(s) + " has " +
                        std::to_string(tokens) + " tokens, expected >= 1");
    }
    for (size_t i = 0; i < per_segment; ++i) {
      const int64_t routed = routed_tokens[s * per_segment + i];
      if (routed < 0 || routed > tokens) {
        throw base::Error("independent token draws: segment " + std::to_string(s) + " routes " +
                          std::to_string(routed) + " tokens to one expert, expected 0.." +
                          std::to_string(tokens));
      }
      const double q = static_cast<double>(routed) / static_cast<double>(tokens);
      share_[s * per_segment + i] = q;
      mean_share_[i] += q / static_cast<double>(segments_);
    }
  }
}

const std::vector<double>& IndependentTokenDraws::DifferentSegmentsTable() const {
  std::call_once(table_once_, [this] {
    const size_t n = static_cast<size_t>(segments_);
    const size_t per_segment = static_cast<size_t>(num_layers_ * num_experts_);
    std::vector<double> expected_distinct(n + 1, 0.0);
    std::vector<double> g(n + 1);  // g[k] = e_k(x_1..x_i) / C(i, k), x = 1 - q
    for (size_t pair = 0; pair < per_segment; ++pair) {
      std::fill(g.begin(), g.end(), 0.0);
      g[0] = 1.0;
      for (size_t i = 1; i <= n; ++i) {
        const double x = 1.0 - share_[(i - 1) * per_segment + pair];
        const double inverse_i = 1.0 / static_cast<double>(i);
        for (size_t k = i; k >= 1; --k) {
          g[k] = (static_cast<double>(i - k) * g[k] + static_cast<double>(k) * x * g[k - 1]) *
                 inverse_i;
        }
      }
      for (size_t k = 0; k <= n; ++k) expected_distinct[k] += 1.0 - g[k];
    }
    for (double& d : expected_distinct) d /= static_cast<double>(num_layers_);
    distinct_by_tokens_ = std::move(expected_distinct);
  });
  return distinct_by_tokens_;
}

std::optional<double> IndependentTokenDraws::DistinctExperts(int64_t tokens) const {
  if (tokens < 1) {
    throw base::Error("independent token draws: a pass has >= 1 token, got " +
                      std::to_string(tokens));
  }
  if (DrawsDifferentSegments(tokens)) {
    const double work = static_cast<double>(segments_) * static_cast<double>(segments_) *
                        static_cast<double>(num_layers_ * num_experts_);
    if (work > kMaxTableWork) return std::nullopt;
    return DifferentSegmentsTable()[static_cast<size_t>(tokens)];
  }
  double distinct = 0;
  const double t = static_cast<double>(tokens);
  for (double q : mean_share_) distinct += 1.0 - std::pow(1.0 - q, t);
  return distinct / static_cast<double>(num_layers_);
}

model::ExpertLoad IndependentTokenDraws::LoadWithReplacement(int64_t tokens) const {
  if (DrawsDifferentSegments(tokens)) {
    throw base::Error("independent token draws: the exact load is for more tokens (" +
                      std::to_string(tokens) + ") than segments (" + std::to_string(segments_) +
                      ")");
  }
  const double t = static_cast<double>(tokens);
  std::vector<double> experts_with(static_cast<size_t>(tokens) + 1, 0.0);  // [tokens per expert]
  const double log_tokens_factorial = base::LogGamma(t + 1.0);
  for (double q : mean_share_) {
    if (q <= 0) continue;
    if (q >= 1) {
      experts_with[static_cast<size_t>(tokens)] += 1.0;
      continue;
    }
    const double mean = t * q, deviation = std::sqrt(t * q * (1.0 - q));
    const double low = std::max(1.0, std::floor(mean - 12.0 * deviation - 1.0));
    const double high = std::min(t, std::ceil(mean + 12.0 * deviation + 1.0));
    const double log_q = std::log(q), log_not_q = std::log1p(-q);
    for (double c = low; c <= high; c += 1.0) {
      experts_with[static_cast<size_t>(c)] +=
          std::exp(log_tokens_factorial - base::LogGamma(c + 1.0) - base::LogGamma(t - c + 1.0) +
                   c * log_q + (t - c) * log_not_q);
    }
  }
  size_t first = 1, last = experts_with.size() - 1;
  while (first < last && experts_with[first] == 0) ++first;
  while (last > first && experts_with[last] == 0) --last;
  model::ExpertLoad load;
  load.first_tokens = static_cast<int64_t>(first);
  for (size_t c = first; c <= last; ++c)
    load.experts.push_back(experts_with[c] / static_cast<double>(num_layers_));
  return load;
}

}  // namespace moelab::routing
