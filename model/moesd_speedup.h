#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

namespace moelab::model {

// The MoESD speedup model (formulas.md section 1, the paper's Algorithm 1), templated on the
// scalar so Ceres can differentiate it (fit/) and plain doubles can evaluate it (sim/, plan).

// The paper's Algorithm 1 sums draft_time + ar_time + verify_time + reject_time; its Eq. 4 has
// gamma * T_D(B,1) + T_T(B,gamma) + T_reject. Both are kept; docs/model.md explains the choice.
enum class SdDenominator { kAlgorithm1, kEquation4 };

std::string ToString(SdDenominator denominator);
SdDenominator SdDenominatorFromString(const std::string& name);  // "algorithm1" | "equation4"

// Parameter order is the paper's: (bias, k1, k2, k3, draft_bias, draft_k, reject_bias,
// reject_k, lambda, s).
struct MoesdParams {
  static constexpr int kCount = 10;
  static constexpr std::array<const char*, kCount> kNames = {
      "bias", "k1", "k2", "k3", "draft_bias", "draft_k", "reject_bias", "reject_k", "lambda", "s"};
  std::array<double, kCount> values{};
};

// One speculative-decoding configuration to evaluate.
struct SdPoint {
  int64_t batch = 1;
  int64_t gamma = 1;
  int64_t top_k = 1;
  int64_t num_experts = 1;
  double sigma = 1;  // accepted-length fraction
};

template <typename T>
struct MoesdTerms {
  T ar_time;
  T verify_time;
  T draft_time;
  T reject_time;
  T speedup;
};

// G(t) with P = lambda * ridge_point_tokens, growth s, differentiable in (P, s).
template <typename T>
T RooflineG(const T& tokens, const T& transition_point, const T& growth) {
  using std::exp;
  using std::log;
  const T ln_s = log(growth);
  if (tokens <= transition_point) return exp(ln_s * tokens);
  return exp(ln_s * transition_point) * (T(1.0) + ln_s * (tokens - transition_point));
}

// `ridge_point_tokens` is the hardware's ridge point expressed in tokens per weight load
// (peak FLOP/s / bandwidth, scaled by bytes per weight / 2 FLOPs).
template <typename T>
MoesdTerms<T> EvaluateMoesd(const T* p, const SdPoint& m, double ridge_point_tokens,
                            SdDenominator denominator) {
  using std::pow;
  const T& bias = p[0];
  const T& k1 = p[1];
  const T& k2 = p[2];
  const T& k3 = p[3];
  const T& draft_bias = p[4];
  const T& draft_k = p[5];
  const T& reject_bias = p[6];
  const T& reject_k = p[7];
  const T transition = p[8] * ridge_point_tokens;
  const T& growth = p[9];

  const double experts = static_cast<double>(m.num_experts);
  const double miss = (experts - static_cast<double>(m.top_k)) / experts;
  const double batch = static_cast<double>(m.batch);
  const double verify_tokens = batch * static_cast<double>(m.gamma);

  const double n_ar = experts * (1.0 - std::pow(miss, batch));
  const double t_ar = batch * static_cast<double>(m.top_k) / n_ar;
  const double n_sd = experts * (1.0 - std::pow(miss, verify_tokens));
  const double t_sd = verify_tokens * static_cast<double>(m.top_k) / n_sd;

  MoesdTerms<T> terms;
  terms.ar_time = bias + k1 * RooflineG(T(batch), transition, growth) + k2 * n_ar +
                  k3 * RooflineG(T(t_ar), transition, growth);
  terms.verify_time = bias + k1 * RooflineG(T(verify_tokens), transition, growth) + k2 * n_sd +
                      k3 * RooflineG(T(t_sd), transition, growth);
  terms.draft_time = draft_bias + draft_k * RooflineG(T(batch), transition, growth);
  terms.reject_time = reject_bias + reject_k * batch;
  const T denominator_time =
      denominator == SdDenominator::kAlgorithm1
          ? terms.draft_time + terms.ar_time + terms.verify_time + terms.reject_time
          : T(static_cast<double>(m.gamma)) * terms.draft_time + terms.verify_time +
                terms.reject_time;
  terms.speedup = T(m.sigma * static_cast<double>(m.gamma + 1)) * terms.ar_time / denominator_time;
  return terms;
}

inline double MoesdSpeedup(const MoesdParams& params, const SdPoint& point,
                           double ridge_point_tokens, SdDenominator denominator) {
  return EvaluateMoesd<double>(params.values.data(), point, ridge_point_tokens, denominator)
      .speedup;
}

}  // namespace moelab::model
