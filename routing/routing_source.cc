#include "routing/routing_source.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "base/error.h"
#include "base/hash.h"
#include "routing/correlated_routing.h"
#include "routing/tuple_hash.h"

namespace moelab::routing {
namespace {

// Salts keep the uniform and popularity streams of one seed unrelated.
constexpr uint64_t kUniformSalt = 0x756e69666f726d00;     // "uniform"
constexpr uint64_t kPopularitySalt = 0x706f70756c617200;  // "popular"

// The generator of one (salt, seed, step, layer, token) tuple: its numbers depend on the tuple
// only, never on what was drawn before for other tokens.
base::SplitMix64Stream TokenRandom(uint64_t salt, uint64_t seed, int64_t step, int64_t layer,
                                   int64_t token) {
  return base::SplitMix64Stream(internal::TupleHash(salt, seed, step, layer, token));
}

void CheckModel(const std::string& who, int64_t num_layers, int64_t num_experts, int64_t top_k) {
  if (num_layers < 1)
    throw base::Error(who + ": num_layers must be >= 1, got " + std::to_string(num_layers));
  if (num_experts < 1 || num_experts > std::numeric_limits<int32_t>::max()) {
    throw base::Error(who + ": num_experts must be in [1, 2147483647], got " +
                      std::to_string(num_experts));
  }
  if (top_k < 1 || top_k > num_experts) {
    throw base::Error(who + ": top_k must be in [1, num_experts = " + std::to_string(num_experts) +
                      "], got " + std::to_string(top_k));
  }
}

[[noreturn, gnu::cold, gnu::noinline]] void ThrowBadRequest(const std::string& who,
                                                            int64_t num_layers, int64_t step,
                                                            int64_t layer, int64_t tokens) {
  if (step < 0) throw base::Error(who + ": step must be >= 0, got " + std::to_string(step));
  if (layer < 0 || layer >= num_layers) {
    throw base::Error(who + ": layer " + std::to_string(layer) +
                      " is out of range, the model has " + std::to_string(num_layers) +
                      " MoE layers");
  }
  throw base::Error(who + ": tokens must be >= 0, got " + std::to_string(tokens));
}

// Inline, the messages out of line: a trace replay checks every layer of every pass.
inline void CheckRequest(const std::string& who, int64_t num_layers, int64_t step, int64_t layer,
                         int64_t tokens) {
  if (step < 0 || layer < 0 || layer >= num_layers || tokens < 0) [[unlikely]]
    ThrowBadRequest(who, num_layers, step, layer, tokens);
}

std::string ModelShape(int64_t num_layers, int64_t num_experts, int64_t top_k) {
  return std::to_string(num_layers) + " MoE layers x " + std::to_string(num_experts) +
         " experts, top-" + std::to_string(top_k);
}

class UniformRouting : public RoutingSource {
 public:
  UniformRouting(int64_t num_layers, int64_t num_experts, int64_t top_k, uint64_t seed)
      : num_layers_(num_layers), num_experts_(num_experts), top_k_(top_k), seed_(seed) {
    CheckModel("uniform routing", num_layers, num_experts, top_k);
  }

  std::string Describe() const override {
    return "uniform routing (" + ModelShape(num_layers_, num_experts_, top_k_) + "), seed " +
           std::to_string(seed_);
  }

  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    CheckRequest("uniform routing", num_layers_, step, layer, tokens);
    out.resize(static_cast<size_t>(tokens));
    // Sparse partial Fisher-Yates over [0, E): only the (at most K) displaced positions are
    // stored, so a token costs O(K^2) whatever E is, and every ordered K-tuple is equally likely.
    std::vector<std::pair<int64_t, int64_t>> displaced;
    displaced.reserve(static_cast<size_t>(top_k_));
    for (int64_t token = 0; token < tokens; ++token) {
      base::SplitMix64Stream random = TokenRandom(kUniformSalt, seed_, step, layer, token);
      displaced.clear();
      auto value_at = [&](int64_t position) {
        for (const auto& [where, value] : displaced) {
          if (where == position) return value;
        }
        return position;
      };
      std::vector<int32_t>& ranked = out[static_cast<size_t>(token)];
      ranked.resize(static_cast<size_t>(top_k_));
      for (int64_t k = 0; k < top_k_; ++k) {
        const int64_t j =
            k + static_cast<int64_t>(random.Below(static_cast<uint64_t>(num_experts_ - k)));
        const int64_t picked = value_at(j);
        const int64_t moved = value_at(k);
        ranked[static_cast<size_t>(k)] = static_cast<int32_t>(picked);
        // Position k is never read again (later j > k); j now holds what was at k.
        bool found = false;
        for (auto& [where, value] : displaced) {
          if (where == j) {
            value = moved;
            found = true;
          }
        }
        if (!found) displaced.emplace_back(j, moved);
      }
    }
  }

 private:
  int64_t num_layers_, num_experts_, top_k_;
  uint64_t seed_;
};

class PopularityRouting : public RoutingSource {
 public:
  PopularityRouting(const model::PopularityTable& table, int64_t num_layers, int64_t num_experts,
                    int64_t top_k, uint64_t seed, std::string origin)
      : num_layers_(num_layers),
        num_experts_(num_experts),
        top_k_(top_k),
        seed_(seed),
        origin_(std::move(origin)) {
    CheckModel("popularity routing (" + origin_ + ")", num_layers, num_experts, top_k);
    if (table.size() != static_cast<size_t>(num_layers) ||
        std::any_of(table.begin(), table.end(), [&](const auto& row) {
          return row.size() != static_cast<size_t>(num_experts);
        })) {
      const size_t table_experts = table.empty() ? 0 : table[0].size();
      std::string experts = std::to_string(table_experts);
      for (const auto& row : table) {
        if (row.size() != table_experts) experts = "a varying number of";
      }
      throw base::Error(origin_ + ": the popularity table has " + std::to_string(table.size()) +
                        " layers x " + experts + " experts, but the model has " +
                        std::to_string(num_layers) + " MoE layers x " +
                        std::to_string(num_experts) + " experts");
    }
    FixedPointPopularity fixed = ToFixedPointPopularity(table, num_experts, top_k, origin_);
    weights_ = std::move(fixed.weights);
    totals_ = std::move(fixed.totals);
  }

  std::string Describe() const override {
    return "popularity routing from " + origin_ + " (" +
           ModelShape(num_layers_, num_experts_, top_k_) + "), seed " + std::to_string(seed_);
  }

  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    CheckRequest("popularity routing (" + origin_ + ")", num_layers_, step, layer, tokens);
    const std::vector<uint64_t>& weights = weights_[static_cast<size_t>(layer)];
    out.resize(static_cast<size_t>(tokens));
    std::vector<char> taken(weights.size(), 0);
    for (int64_t token = 0; token < tokens; ++token) {
      base::SplitMix64Stream random = TokenRandom(kPopularitySalt, seed_, step, layer, token);
      std::vector<int32_t>& ranked = out[static_cast<size_t>(token)];
      ranked.resize(static_cast<size_t>(top_k_));
      uint64_t remaining = totals_[static_cast<size_t>(layer)];
      for (int64_t k = 0; k < top_k_; ++k) {
        // Successive sampling: draw among the experts not yet taken, proportional to weight.
        uint64_t r = random.Below(remaining);
        size_t picked = 0;
        for (size_t expert = 0; expert < weights.size(); ++expert) {
          if (taken[expert] || weights[expert] == 0) continue;
          if (r < weights[expert]) {
            picked = expert;
            break;
          }
          r -= weights[expert];
        }
        taken[picked] = 1;
        remaining -= weights[picked];
        ranked[static_cast<size_t>(k)] = static_cast<int32_t>(picked);
      }
      for (int32_t expert : ranked) taken[static_cast<size_t>(expert)] = 0;
    }
  }

 private:
  int64_t num_layers_, num_experts_, top_k_;
  uint64_t seed_;
  std::string origin_;
  std::vector<std::vector<uint64_t>> weights_;  // [layer][expert], fixed point
  std::vector<uint64_t> totals_;                // [layer]
};

class TraceRouting : public RoutingSource {
 public:
  TraceRouting(RoutingTrace trace, int64_t num_layers, int64_t num_experts, int64_t top_k,
               std::string origin)
      : trace_(std::move(trace)), origin_(std::move(origin)) {
    if (origin_.empty()) origin_ = "routing trace '" + trace_.source + "'";
    CheckModel("trace routing (" + origin_ + ")", num_layers, num_experts, top_k);
    trace_.Validate(origin_);
    if (trace_.num_layers != num_layers || trace_.num_experts != num_experts ||
        trace_.top_k != top_k) {
      throw base::Error(origin_ + ": the trace has " +
                        ModelShape(trace_.num_layers, trace_.num_experts, trace_.top_k) +
                        ", but the model has " + ModelShape(num_layers, num_experts, top_k));
    }
  }

  std::string Describe() const override {
    return "trace replay of " + origin_ + " (" + std::to_string(trace_.steps.size()) +
           " steps; source: " + trace_.source + ")";
  }

  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    out = *Stored(step, layer, tokens);
  }

  const std::vector<std::vector<int32_t>>* Stored(int64_t step, int64_t layer,
                                                  int64_t tokens) override {
    CheckRequest(origin_, trace_.num_layers, step, layer, tokens);
    if (step >= static_cast<int64_t>(trace_.steps.size())) [[unlikely]]
      ThrowPastEnd(step);
    const RoutingStep& routed = trace_.steps[static_cast<size_t>(step)];
    if (tokens != routed.tokens) [[unlikely]]
      ThrowTokens(step, tokens);
    return &routed.experts[static_cast<size_t>(layer)];
  }

 private:
  // The errors out of line: Stored is called for every layer of every pass.
  [[noreturn, gnu::cold, gnu::noinline]] void ThrowPastEnd(int64_t step) const {
    throw base::Error(origin_ + ": asked for step " + std::to_string(step) +
                      ", but the trace has only " + std::to_string(trace_.steps.size()) +
                      " steps (0.." +
                      std::to_string(static_cast<int64_t>(trace_.steps.size()) - 1) + ")");
  }
  [[noreturn, gnu::cold, gnu::noinline]] void ThrowTokens(int64_t step, int64_t tokens) const {
    const RoutingStep& routed = trace_.steps[static_cast<size_t>(step)];
    throw base::Error(origin_ + ": asked for " + std::to_string(tokens) + " tokens at step " +
                      std::to_string(step) + " (" + routed.kind + "), but the trace's step has " +
                      std::to_string(routed.tokens) + " tokens");
  }

  RoutingTrace trace_;
  std::string origin_;
};

}  // namespace

std::unique_ptr<RoutingSource> MakeUniformRouting(int64_t num_layers, int64_t num_experts,
                                                  int64_t top_k, uint64_t seed) {
  return std::make_unique<UniformRouting>(num_layers, num_experts, top_k, seed);
}

std::unique_ptr<RoutingSource> MakePopularityRouting(const model::PopularityTable& table,
                                                     int64_t num_layers, int64_t num_experts,
                                                     int64_t top_k, uint64_t seed,
                                                     const std::string& origin) {
  return std::make_unique<PopularityRouting>(table, num_layers, num_experts, top_k, seed, origin);
}

std::unique_ptr<RoutingSource> MakeTraceRouting(RoutingTrace trace, int64_t num_layers,
                                                int64_t num_experts, int64_t top_k,
                                                const std::string& origin) {
  return std::make_unique<TraceRouting>(std::move(trace), num_layers, num_experts, top_k, origin);
}

FixedPointPopularity ToFixedPointPopularity(const model::PopularityTable& table,
                                            int64_t num_experts, int64_t top_k,
                                            const std::string& origin) {
  int bits = 0;
  while ((int64_t{1} << bits) < num_experts) ++bits;
  const int scale_bits = std::min(52, 62 - bits);  // a layer's total stays below 2^62
  FixedPointPopularity fixed;
  fixed.weights.resize(table.size());
  fixed.totals.assign(table.size(), 0);
  for (size_t layer = 0; layer < table.size(); ++layer) {
    double largest = 0;
    int64_t nonzero = 0;
    for (size_t expert = 0; expert < table[layer].size(); ++expert) {
      const double count = table[layer][expert];
      if (!std::isfinite(count) || count < 0) {
        throw base::Error(origin + ": layer " + std::to_string(layer) + " expert " +
                          std::to_string(expert) + ": popularity counts must be finite and >= 0");
      }
      largest = std::max(largest, count);
      if (count > 0) ++nonzero;
    }
    if (nonzero < top_k) {
      throw base::Error(
          origin + ": layer " + std::to_string(layer) + " has " + std::to_string(nonzero) +
          " experts with nonzero counts, fewer than top_k = " + std::to_string(top_k) +
          " (each token needs " + std::to_string(top_k) + " distinct experts)");
    }
    for (double count : table[layer]) {
      uint64_t weight = 0;
      if (count > 0) {
        weight = static_cast<uint64_t>(std::llround(std::ldexp(count / largest, scale_bits)));
        weight = std::max<uint64_t>(weight, 1);
      }
      fixed.weights[layer].push_back(weight);
      fixed.totals[layer] += weight;
    }
  }
  return fixed;
}

std::unique_ptr<RoutingSource> MakeRoutingSource(const RoutingSpec& spec, int64_t num_layers,
                                                 int64_t num_experts, int64_t top_k,
                                                 uint64_t seed) {
  switch (spec.kind) {
    case RoutingSpec::Kind::kGate:
      return nullptr;
    case RoutingSpec::Kind::kUniform:
      return MakeUniformRouting(num_layers, num_experts, top_k, seed);
    case RoutingSpec::Kind::kPopularity:
      return MakePopularityRouting(model::LoadPopularityTable(spec.file), num_layers, num_experts,
                                   top_k, seed, spec.file);
    case RoutingSpec::Kind::kCorrelated:
      return MakeCorrelatedRouting(CorrelatedOptionsOf(spec), num_layers, num_experts, top_k, seed);
    case RoutingSpec::Kind::kTrace:
      return MakeTraceRouting(LoadRoutingTrace(spec.file), num_layers, num_experts, top_k,
                              spec.file);
  }
  return nullptr;
}

std::unique_ptr<RoutingSource> MakeRoutingSource(const std::string& spec, int64_t num_layers,
                                                 int64_t num_experts, int64_t top_k,
                                                 uint64_t seed) {
  return MakeRoutingSource(ParseRoutingSpec(spec), num_layers, num_experts, top_k, seed);
}

}  // namespace moelab::routing
