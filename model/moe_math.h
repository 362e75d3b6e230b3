#pragma once

#include <cstdint>

namespace moelab::model {

// The MoESD quantities (formulas.md section 1). Arguments are validated; impossible values
// (K > E, alpha outside [0, 1), gamma < 1, negative tokens) throw moelab::Error.

// Expected number of distinct experts activated by `tokens` tokens through a gate with
// `num_experts` experts and `top_k` per token, under uniform routing:
//   N(t) = E * (1 - ((E - K) / E)^t).
// `tokens` may be fractional (a mean); N(0) = 0.
double ExpectedActivatedExperts(double tokens, int64_t num_experts, int64_t top_k);

// Probability that a given expert is activated by `tokens` tokens: 1 - ((E - K)/E)^t.
double ExpertActivationProbability(double tokens, int64_t num_experts, int64_t top_k);

// Mean tokens per activated expert: Texp(t; rho) = t * K / N(t) = rho*t / (1 - (1 - rho)^t),
// for t > 0 and rho in (0, 1]; increasing in rho for t > 1. Texp(1) = 1.
double TokensPerActivatedExpert(double tokens, double sparsity);

// Smallest token count that activates at least tau * E experts in expectation:
//   T_thres = ceil(log_(1 - rho)(1 - tau)), rho = K/E in (0, 1), tau in (0, 1).
// For rho = 1 (dense, or K = E) every expert is active from the first token: returns 1.
int64_t FullActivationThreshold(double sparsity, double tau);

// Accepted tokens per speculative round divided by (gamma + 1):
//   sigma = ((1 - alpha^(gamma+1)) / (1 - alpha)) / (gamma + 1), alpha in [0, 1), gamma >= 1.
// Limits: sigma -> 1/(gamma+1) as alpha -> 0, sigma -> 1 as alpha -> 1.
double AcceptedLengthFraction(double alpha, int64_t gamma);

// Whether an accepted-length fraction is possible at `gamma`: every round yields at least the
// target's own token, so sigma (gamma + 1) >= 1 (within 0.1 %: 0.333 passes for 1/3 at gamma 2).
inline bool SigmaYieldsAToken(double sigma, int64_t gamma) {
  return sigma * static_cast<double>(gamma + 1) >= 1.0 - 1e-3;
}

// Expected tokens emitted per round: sigma * (gamma + 1).
double ExpectedTokensPerRound(double alpha, int64_t gamma);

// The MoESD roofline curve: exponential s^t up to the transition point P, then linear with
// continuous value and slope: G(t) = s^P (1 + ln(s) (t - P)) for t > P. s >= 1, P >= 0.
struct RooflineCurve {
  double transition_point = 1;  // P = lambda * RP, in tokens
  double growth = 1;            // s

  double Value(double tokens) const;
  double Slope(double tokens) const;
};

}  // namespace moelab::model
