#include "policies/calibration.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "base/hash.h"
#include "routing/routing_trace.h"

namespace moelab::policies {
namespace {

constexpr uint64_t kCalibrationSalt = 0x63616c6962726174ULL;  // "calibrat"

}  // namespace

void CalibrationOptions::Validate() const {
  if (tokens < 1) throw base::Error("calibration: field 'tokens' must be >= 1");
  if (tokens_per_request < 1)
    throw base::Error("calibration: field 'tokens_per_request' must be >= 1");
  if (semantic_dim < 1) throw base::Error("calibration: field 'semantic_dim' must be >= 1");
  if (!(gate_residual_mass >= 0 && gate_residual_mass < 1)) {
    throw base::Error("calibration: field 'gate_residual_mass' must be in [0, 1)");
  }
  if (max_history < 0) throw base::Error("calibration: field 'max_history' must be >= 0");
}

RoutingCalibration CalibrateRouting(const std::string& spec, int64_t num_layers,
                                    int64_t num_experts, int64_t top_k, uint64_t seed,
                                    const CalibrationOptions& options) {
  return CalibrateRouting(routing::ParseRoutingSpec(spec), num_layers, num_experts, top_k, seed,
                          options);
}

RoutingCalibration CalibrateRouting(const routing::RoutingSpec& spec, int64_t num_layers,
                                    int64_t num_experts, int64_t top_k, uint64_t seed,
                                    const CalibrationOptions& options) {
  options.Validate();
  const size_t layers = static_cast<size_t>(num_layers), experts = static_cast<size_t>(num_experts);
  // routes[token][layer] = the token's K experts.
  std::vector<std::vector<std::vector<int32_t>>> routes;
  RoutingCalibration calibration;
  if (spec.kind == routing::RoutingSpec::Kind::kTrace) {
    const std::string& trace_file = spec.file;
    const routing::RoutingTrace trace = routing::LoadRoutingTrace(trace_file);
    // Checks the shape against the model with the same message the replay would give.
    routing::MakeTraceRouting(trace, num_layers, num_experts, top_k, trace_file);
    for (const routing::RoutingStep& step : trace.steps) {
      for (int64_t token = 0;
           token < step.tokens && static_cast<int64_t>(routes.size()) < options.tokens; ++token) {
        std::vector<std::vector<int32_t>> per_layer(layers);
        for (size_t layer = 0; layer < layers; ++layer)
          per_layer[layer] = step.experts[layer][static_cast<size_t>(token)];
        routes.push_back(std::move(per_layer));
      }
    }
    calibration.in_sample = true;
    calibration.source = "in-sample: the replayed trace " + trace_file;
  } else {
    const uint64_t calibration_seed = base::SplitMix64(seed ^ kCalibrationSalt);
    std::unique_ptr<routing::RoutingSource> source =
        routing::MakeRoutingSource(spec, num_layers, num_experts, top_k, calibration_seed);
    if (!source)
      throw base::Error(options.option +
                        " gate: the simulator has no model gate; use uniform, popularity:FILE, "
                        "correlated:... or trace:FILE");
    routes.assign(static_cast<size_t>(options.tokens), std::vector<std::vector<int32_t>>(layers));
    std::vector<std::vector<int32_t>> routed;
    for (size_t layer = 0; layer < layers; ++layer) {
      source->Route(0, static_cast<int64_t>(layer), options.tokens, routed);
      for (size_t token = 0; token < routed.size(); ++token) routes[token][layer] = routed[token];
    }
    calibration.source =
        source->Describe() + " (calibration seed " + std::to_string(calibration_seed) + ")";
  }
  calibration.tokens = static_cast<int64_t>(routes.size());

  calibration.popularity.assign(layers, std::vector<double>(experts, 0.0));
  std::vector<std::vector<double>> pairs(layers > 0 ? layers - 1 : 0,
                                         std::vector<double>(experts * experts, 0.0));
  for (const auto& token : routes) {
    for (size_t layer = 0; layer < layers; ++layer) {
      for (int32_t e : token[layer]) {
        calibration.popularity[layer][static_cast<size_t>(e)] += 1;
        if (layer + 1 < layers) {
          for (int32_t next : token[layer + 1])
            pairs[layer][static_cast<size_t>(e) * experts + static_cast<size_t>(next)] += 1;
        }
      }
    }
  }
  for (size_t layer = 0; layer + 1 < layers; ++layer) {
    const std::vector<double>& next_popularity = calibration.popularity[layer + 1];
    const double next_total = std::accumulate(next_popularity.begin(), next_popularity.end(), 0.0);
    std::vector<float> matrix(experts * experts);
    for (size_t e = 0; e < experts; ++e) {
      double row_total = 0;
      for (size_t next = 0; next < experts; ++next) row_total += pairs[layer][e * experts + next];
      for (size_t next = 0; next < experts; ++next) {
        const double prior = next_total > 0 ? next_popularity[next] / next_total
                                            : 1.0 / static_cast<double>(experts);
        // One pseudo-count spread like the next layer's popularity; rows sum to K like the
        // routing (each used expert is followed by K experts).
        matrix[e * experts + next] = static_cast<float>(
            (pairs[layer][e * experts + next] + static_cast<double>(top_k) * prior) /
            (row_total / static_cast<double>(top_k) + 1.0));
      }
    }
    calibration.transition.push_back(std::move(matrix));
  }

  const size_t history = std::min(routes.size(), static_cast<size_t>(options.max_history));
  std::vector<int64_t> counts(experts);
  std::vector<float> row;
  for (size_t token = 0; token < history; ++token) {
    OffloadSetup::ExpertMap map;
    map.request = static_cast<int64_t>(token) / options.tokens_per_request;
    map.semantic = SemanticEmbedding(base::SplitMix64(seed ^ kCalibrationSalt), map.request,
                                     options.semantic_dim);
    for (size_t layer = 0; layer < layers; ++layer) {
      std::fill(counts.begin(), counts.end(), 0);
      for (int32_t e : routes[token][layer]) ++counts[static_cast<size_t>(e)];
      GateProbabilities(counts, 1, top_k, calibration.popularity[layer], options.gate_residual_mass,
                        row);
      map.probabilities.insert(map.probabilities.end(), row.begin(), row.end());
    }
    calibration.history.push_back(std::move(map));
  }
  return calibration;
}

}  // namespace moelab::policies
