#include "model/moe_math.h"

#include <cmath>
#include <string>

#include "base/error.h"

namespace moelab::model {
namespace {

void CheckGate(int64_t num_experts, int64_t top_k) {
  if (num_experts < 1)
    throw base::Error("number of experts E must be at least 1, got " + std::to_string(num_experts));
  if (top_k < 1 || top_k > num_experts) {
    throw base::Error("top-K must be between 1 and E (" + std::to_string(num_experts) + "), got " +
                      std::to_string(top_k));
  }
}

void CheckTokens(double tokens) {
  if (!(tokens >= 0) || !std::isfinite(tokens)) {
    throw base::Error("token count must be a finite number >= 0, got " + std::to_string(tokens));
  }
}

void CheckSparsity(double sparsity) {
  if (!(sparsity > 0 && sparsity <= 1)) {
    throw base::Error("sparsity rho = K/E must be in (0, 1], got " + std::to_string(sparsity));
  }
}

}  // namespace

double ExpertActivationProbability(double tokens, int64_t num_experts, int64_t top_k) {
  CheckGate(num_experts, top_k);
  CheckTokens(tokens);
  const double miss = static_cast<double>(num_experts - top_k) / static_cast<double>(num_experts);
  return 1.0 - std::pow(miss, tokens);
}

double ExpectedActivatedExperts(double tokens, int64_t num_experts, int64_t top_k) {
  return static_cast<double>(num_experts) * ExpertActivationProbability(tokens, num_experts, top_k);
}

double TokensPerActivatedExpert(double tokens, double sparsity) {
  CheckSparsity(sparsity);
  CheckTokens(tokens);
  if (tokens == 0) throw base::Error("tokens per activated expert is undefined for 0 tokens");
  if (sparsity == 1.0) return tokens;
  // -expm1(t*log1p(-rho)) keeps precision for tiny rho.
  return sparsity * tokens / -std::expm1(tokens * std::log1p(-sparsity));
}

int64_t FullActivationThreshold(double sparsity, double tau) {
  CheckSparsity(sparsity);
  if (!(tau > 0 && tau < 1)) throw base::Error("tau must be in (0, 1), got " + std::to_string(tau));
  if (sparsity == 1.0) return 1;
  const double exact = std::log1p(-tau) / std::log1p(-sparsity);
  // Guard against log round-off putting an exact integer just above itself.
  const double rounded = std::round(exact);
  if (std::fabs(exact - rounded) < 1e-9) return static_cast<int64_t>(rounded);
  return static_cast<int64_t>(std::ceil(exact));
}

double AcceptedLengthFraction(double alpha, int64_t gamma) {
  if (!(alpha >= 0 && alpha < 1)) {
    throw base::Error("acceptance rate alpha must be in [0, 1), got " + std::to_string(alpha));
  }
  if (gamma < 1)
    throw base::Error("gamma (draft tokens per round) must be at least 1, got " +
                      std::to_string(gamma));
  const double n = static_cast<double>(gamma + 1);
  return ((1.0 - std::pow(alpha, n)) / (1.0 - alpha)) / n;
}

double ExpectedTokensPerRound(double alpha, int64_t gamma) {
  return AcceptedLengthFraction(alpha, gamma) * static_cast<double>(gamma + 1);
}

double RooflineCurve::Value(double tokens) const {
  if (tokens <= transition_point) return std::pow(growth, tokens);
  return std::pow(growth, transition_point) *
         (1.0 + std::log(growth) * (tokens - transition_point));
}

double RooflineCurve::Slope(double tokens) const {
  const double ln_s = std::log(growth);
  if (tokens <= transition_point) return std::pow(growth, tokens) * ln_s;
  return std::pow(growth, transition_point) * ln_s;
}

}  // namespace moelab::model
