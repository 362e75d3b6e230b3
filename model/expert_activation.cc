#include "model/expert_activation.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "base/stats.h"
#include "model/forward_cost.h"
#include "model/moe_math.h"

namespace moelab::model {

std::string ToString(PassKind kind) {
  switch (kind) {
    case PassKind::kPrefill:
      return "prefill";
    case PassKind::kDecode:
      return "decode";
    case PassKind::kVerify:
      return "verify";
  }
  return "?";
}

PassKind PassKindOf(const ForwardShape& shape) {
  if (shape.tokens_per_sequence == 1) return PassKind::kDecode;
  return shape.context_length == 0 ? PassKind::kPrefill : PassKind::kVerify;
}

UniformExpertActivation::UniformExpertActivation(int64_t num_experts, int64_t top_k)
    : num_experts_(num_experts), top_k_(top_k) {
  if (top_k < 1 || top_k > num_experts) {
    throw base::Error("uniform routing needs 1 <= top_k <= experts, got top_k " +
                      std::to_string(top_k) + " of " + std::to_string(num_experts) + " experts");
  }
}

double UniformExpertActivation::DistinctExperts(int64_t batch, int64_t tokens_per_sequence,
                                                PassKind) const {
  return ExpectedActivatedExperts(
      static_cast<double>(batch) * static_cast<double>(tokens_per_sequence), num_experts_, top_k_);
}

ExpertLoad UniformExpertActivation::Load(int64_t batch, int64_t tokens_per_sequence,
                                         PassKind) const {
  if (batch < 1 || tokens_per_sequence < 1) {
    throw base::Error("a pass has at least one sequence of one token, got " +
                      std::to_string(batch) + " x " + std::to_string(tokens_per_sequence));
  }
  const double tokens = static_cast<double>(batch) * static_cast<double>(tokens_per_sequence);
  const double p = static_cast<double>(top_k_) / static_cast<double>(num_experts_);
  ExpertLoad load;
  if (p == 1.0) {  // every expert gets every token
    load.first_tokens = batch * tokens_per_sequence;
    load.experts = {static_cast<double>(num_experts_)};
    return load;
  }
  const double mean = tokens * p, deviation = std::sqrt(tokens * p * (1.0 - p));
  const double low = std::max(1.0, std::floor(mean - 12.0 * deviation - 1.0));
  const double high = std::min(tokens, std::ceil(mean + 12.0 * deviation + 1.0));
  load.first_tokens = static_cast<int64_t>(low);
  const double log_p = std::log(p), log_q = std::log1p(-p), log_n = base::LogGamma(tokens + 1.0);
  for (double t = low; t <= high; t += 1.0) {
    const double log_term = log_n - base::LogGamma(t + 1.0) - base::LogGamma(tokens - t + 1.0) +
                            t * log_p + (tokens - t) * log_q;
    load.experts.push_back(static_cast<double>(num_experts_) * std::exp(log_term));
  }
  return load;
}

namespace {

const ExpertActivation& CheckedActivation(const MoeSpec& moe, const ExpertActivation& activation) {
  if (activation.num_experts() != moe.num_experts || activation.top_k() != moe.top_k) {
    throw base::Error("routing " + activation.Describe() + " was recorded on a gate of " +
                      std::to_string(activation.num_experts()) + " experts, top-" +
                      std::to_string(activation.top_k()) + "; the model has " +
                      std::to_string(moe.num_experts) + " experts, top-" +
                      std::to_string(moe.top_k));
  }
  return activation;
}

}  // namespace

double ActivatedExpertsPerLayer(const MoeSpec& moe, const ForwardShape& shape) {
  const double tokens =
      static_cast<double>(shape.batch) * static_cast<double>(shape.tokens_per_sequence);
  if (shape.activation == nullptr)
    return ExpectedActivatedExperts(tokens, moe.num_experts, moe.top_k);
  return CheckedActivation(moe, *shape.activation)
      .DistinctExperts(shape.batch, shape.tokens_per_sequence, PassKindOf(shape));
}

ExpertLoad ExpertLoadPerLayer(const MoeSpec& moe, const ForwardShape& shape) {
  if (shape.activation == nullptr) {
    return UniformExpertActivation(moe.num_experts, moe.top_k)
        .Load(shape.batch, shape.tokens_per_sequence, PassKindOf(shape));
  }
  return CheckedActivation(moe, *shape.activation)
      .Load(shape.batch, shape.tokens_per_sequence, PassKindOf(shape));
}

std::string DescribeActivation(const ExpertActivation* activation) {
  return activation ? activation->Describe() : "uniform";
}

}  // namespace moelab::model
