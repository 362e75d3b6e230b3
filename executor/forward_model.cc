#include "executor/forward_model.h"

#include <numeric>
#include <string>

#include "base/error.h"

namespace moelab::executor {

int64_t CheckForwardBatch(const ExecutorConfig& config, const std::vector<SequenceInput>& batch) {
  int64_t tokens = 0;
  for (const SequenceInput& s : batch) {
    if (s.cache == nullptr || s.tokens.empty())
      throw base::Error("forward pass: every sequence needs a cache and at least one token");
    if (s.cache->length() + static_cast<int64_t>(s.tokens.size()) > s.cache->capacity()) {
      throw base::Error("forward pass: sequence would exceed its KV cache capacity (" +
                        std::to_string(s.cache->capacity()) + " positions)");
    }
    for (const int32_t token : s.tokens) {
      if (token < 0 || token >= config.vocab_size) {
        throw base::Error("token id " + std::to_string(token) + " outside the vocabulary [0, " +
                          std::to_string(config.vocab_size) + ")");
      }
    }
    tokens += static_cast<int64_t>(s.tokens.size());
  }
  return tokens;
}

void TopK(const float* probabilities, int64_t count, int64_t k, int32_t* indices) {
  for (int64_t slot = 0; slot < k; ++slot) {
    int32_t best = -1;
    for (int64_t e = 0; e < count; ++e) {
      bool taken = false;
      for (int64_t s = 0; s < slot; ++s) taken |= indices[s] == e;
      if (!taken && (best < 0 || probabilities[e] > probabilities[best]))
        best = static_cast<int32_t>(e);
    }
    indices[slot] = best;
  }
}

void ChooseExperts(const ExecutorConfig& config, const float* probabilities, int64_t tokens,
                   const std::vector<std::vector<int32_t>>* forced,
                   std::vector<std::vector<int32_t>>& experts,
                   std::vector<std::vector<float>>& weights) {
  const int64_t k = config.top_k;
  experts.resize(static_cast<size_t>(tokens));
  weights.resize(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) {
    const float* p = probabilities + t * config.num_experts;
    std::vector<int32_t>& chosen = experts[t];
    chosen.resize(static_cast<size_t>(k));
    if (forced) {
      chosen = (*forced)[t];
    } else {
      TopK(p, config.num_experts, k, chosen.data());
    }
    std::vector<float>& w = weights[t];
    w.resize(static_cast<size_t>(k));
    double sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += w[j] = p[chosen[j]];
    if (config.norm_topk_prob) {
      for (float& value : w) value = static_cast<float>(value / sum);
    }
  }
}

routing::RoutingStep NewRoutingStep(const ForwardOptions& options,
                                    const std::vector<SequenceInput>& batch, int64_t tokens) {
  routing::RoutingStep step;
  step.kind = options.step_kind;
  step.tokens = tokens;
  if (options.record) {
    for (const SequenceInput& s : batch)
      step.sequence_tokens.push_back(static_cast<int64_t>(s.tokens.size()));
  }
  return step;
}

std::vector<int64_t> LogitRowIndices(const std::vector<SequenceInput>& batch, LogitRows rows,
                                     int64_t tokens) {
  std::vector<int64_t> indices;
  if (rows == LogitRows::kAll) {
    indices.resize(static_cast<size_t>(tokens));
    std::iota(indices.begin(), indices.end(), 0);
    return indices;
  }
  int64_t end = 0;
  for (const SequenceInput& s : batch) {
    const int64_t start = end;
    end += static_cast<int64_t>(s.tokens.size());
    const bool every = rows == LogitRows::kLastOrEvery && s.every_logit;
    for (int64_t row = every ? start : end - 1; row < end; ++row) indices.push_back(row);
  }
  return indices;
}

void RouteLayer(const ExecutorConfig& config, const float* probabilities, int64_t tokens,
                const ForwardOptions& options, int64_t pass, int64_t moe_layer,
                routing::RoutingStep* record, std::vector<std::vector<int32_t>>& experts,
                std::vector<std::vector<float>>& weights) {
  std::vector<std::vector<int32_t>> forced;
  if (options.routing) options.routing->Route(pass, moe_layer, tokens, forced);
  ChooseExperts(config, probabilities, tokens, options.routing ? &forced : nullptr, experts,
                weights);
  if (record) {
    if (record->experts.empty())
      record->experts.resize(static_cast<size_t>(config.num_layers - config.first_dense_layers));
    record->experts[static_cast<size_t>(moe_layer)] = experts;
  }
}

}  // namespace moelab::executor
