#pragma once

// Planted-truth data for the fit tests: MoESD speedups and latency curves evaluated from chosen
// parameters, with seeded multiplicative Gaussian noise (deterministic across platforms: the
// normal deviates are made here from mt19937_64 by Box-Muller, not by <random>'s distributions).

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "fit/sd_bounds.h"
#include "fit/sd_measurements.h"
#include "model/moe_math.h"
#include "model/moesd_speedup.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::testing {

class Noise {
 public:
  explicit Noise(uint64_t seed) : engine_(seed) {}
  double Normal() {
    const double u1 = (static_cast<double>(engine_() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(engine_() >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }
  // value * (1 + relative * N(0, 1))
  double Multiplicative(double value, double relative) {
    return value * (1.0 + relative * Normal());
  }

 private:
  std::mt19937_64 engine_;
};

// The paper's setting: Qwen2-57B-A14B with a Qwen2-0.5B draft on two A100-80GB SXM.
inline fit::SdFitScales QwenScales(const std::vector<fit::SdMeasurement>& measurements) {
  const model::PresetStore store(PresetDir());
  return fit::ComputeSdFitScales(store.LoadModel("qwen2-57b-a14b"), store.LoadModel("qwen2-0.5b"),
                                 store.LoadHardware("2xa100-80gb-sxm"), measurements, std::nullopt);
}

// Planted parameters inside the bounds, sized from the physical scales so the curve has the
// paper's shape (rise then fall with batch): lambda 0.6, a knee G(P) = e^2.5.
inline model::MoesdParams PlantedSdParams(const fit::SdFitScales& s) {
  const double lambda = 0.6;
  const double growth = std::exp(2.5 / (lambda * s.ridge_point_tokens));
  model::MoesdParams p;
  p.values = {1.5 * s.t_dense_s,
              0.03 * s.t_dense_s,
              1.5 * s.t_expert_s,
              0.2 * s.t_dense_s,
              2.0 * s.t_draft_s,
              0.05 * s.t_draft_s,
              0.2 * s.t_reject_max_s,
              0.002 * s.t_reject_max_s,
              lambda,
              growth};
  return p;
}

// sigma from a per-token acceptance rate alpha = 0.8 (formulas.md section 1).
inline double SigmaFor(int64_t gamma) { return model::AcceptedLengthFraction(0.8, gamma); }

// Evenly spread grid: K in `top_ks`, E = 64, gamma in `gammas`, batch in `batches`, in that
// nesting order (K outermost). Speedups carry `relative_noise` multiplicative noise.
inline std::vector<fit::SdMeasurement> SdGrid(
    const model::MoesdParams& truth, double ridge_point_tokens, model::SdDenominator denominator,
    const std::vector<int64_t>& top_ks, const std::vector<int64_t>& gammas,
    const std::vector<int64_t>& batches, double relative_noise, uint64_t seed) {
  Noise noise(seed);
  std::vector<fit::SdMeasurement> points;
  for (int64_t k : top_ks) {
    for (int64_t gamma : gammas) {
      for (int64_t batch : batches) {
        fit::SdMeasurement m;
        m.point = {batch, gamma, k, 64, SigmaFor(gamma)};
        m.speedup = noise.Multiplicative(
            model::MoesdSpeedup(truth, m.point, ridge_point_tokens, denominator), relative_noise);
        m.origin = "synthetic";
        points.push_back(m);
      }
    }
  }
  return points;
}

inline std::vector<int64_t> PowersOfTwo(int64_t up_to) {
  std::vector<int64_t> values;
  for (int64_t v = 1; v <= up_to; v *= 2) values.push_back(v);
  return values;
}

}  // namespace moelab::testing
