#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace moelab {

// Speculative-decoding plan from the analytic cost model (formulas.md section 1):
//   speedup = sigma (gamma + 1) T_T(B, 1) / (gamma T_D(B, 1) + T_T(B, v) + T_reject)
//   target efficiency = T_T(B, 1) / T_T(B, v)
// where v, the positions the target verifies per sequence, is gamma + 1 by default (the last
// accepted token plus gamma drafts, as the executor runs it) or gamma (the paper's T_T(B, gamma)).

enum class VerifyPositions { kGammaPlusOne, kGamma };
std::string ToString(VerifyPositions positions);
VerifyPositions VerifyPositionsFromString(const std::string& name);  // "gamma+1" | "gamma"

struct SdPlanOptions {
  std::vector<int64_t> batches{1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<int64_t> gammas{1, 2, 3, 4, 5, 6, 7, 8};
  double alpha = 0.8;              // per-token acceptance rate, [0, 1)
  std::optional<double> sigma;     // when set, the accepted-length fraction for every gamma, (0, 1]
  int64_t context_length = 1024;   // tokens already in each sequence's KV cache
  VerifyPositions verify = VerifyPositions::kGammaPlusOne;

  void Validate() const;  // batches >= 1, gammas >= 1, alpha in [0, 1), context >= 0
};

struct SdPlanRow {
  int64_t batch = 0;
  int64_t gamma = 0;
  double alpha = 0;  // NaN when the sweep fixed sigma instead
  double sigma = 0;
  double speedup = 0;
  double target_efficiency = 0;
  double target_step_s = 0;  // T_T(B, 1): one autoregressive step
  double verify_s = 0;       // T_T(B, v)
  double draft_step_s = 0;   // T_D(B, 1)
  double reject_s = 0;
  double draft_share = 0;    // of one SD round's time
  double verify_share = 0;
  bool fits_memory = true;   // weights of both models + KV cache of the batch
};

struct SdBestGamma {
  int64_t batch = 0;
  int64_t gamma = 0;
  double speedup = 0;
};

struct SdPlan {
  std::vector<SdPlanRow> rows;
  std::vector<SdBestGamma> best_gamma;
  // Smallest and largest batch whose best speedup exceeds 1 (absent when SD never pays).
  std::optional<std::pair<int64_t, int64_t>> pays_batch_range;
  std::string cost_source = "analytic-roofline";
  std::string device;
  std::string compute_dtype;
};

// The times an SD round is made of, from one cost source. Implementations: the analytic roofline
// below; a measured, fitted profile (sim/). Calls may be memoized: same arguments, same result.
class SdStepCosts {
 public:
  virtual ~SdStepCosts() = default;
  virtual std::string source() const = 0;       // e.g. "analytic-roofline"
  virtual std::string device() const = 0;
  virtual std::string compute_dtype() const = 0;
  virtual double TargetStep(int64_t batch, int64_t positions) = 0;  // T_T(B, s), seconds
  virtual double DraftStep(int64_t batch) = 0;                      // T_D(B, 1)
  virtual double Reject(int64_t batch, int64_t gamma) = 0;
  virtual bool Fits(int64_t batch, int64_t gamma) = 0;  // weights + KV of both models
};

// The analytic roofline (forward_cost.h) of target and draft on `hardware` at a fixed context.
// Refuses a configuration whose weights do not fit the hardware's memory (naming the sizes).
// `source` names where `params` came from ("calibrated-roofline" when a profile fitted them).
class AnalyticSdStepCosts : public SdStepCosts {
 public:
  AnalyticSdStepCosts(const MoeModelSpec& target, const MoeModelSpec& draft, const HardwareSpec& hardware,
                      const CostParameters& params, int64_t context_length,
                      std::string source = "analytic-roofline");
  std::string source() const override { return source_; }
  std::string device() const override { return device_; }
  std::string compute_dtype() const override { return compute_dtype_; }
  double TargetStep(int64_t batch, int64_t positions) override;
  double DraftStep(int64_t batch) override;
  double Reject(int64_t batch, int64_t gamma) override;
  bool Fits(int64_t batch, int64_t gamma) override;

 private:
  const MoeModelSpec& target_;
  const MoeModelSpec& draft_;
  const HardwareSpec& hardware_;
  CostParameters params_;
  int64_t context_length_;
  double weights_per_device_ = 0;
  double capacity_per_device_ = 0;
  std::string device_, compute_dtype_, source_;
  std::map<std::pair<int64_t, int64_t>, double> target_steps_;
  std::map<int64_t, double> draft_steps_;
};

// The plan over options.batches x options.gammas from any cost source.
SdPlan PlanSpeculativeDecoding(SdStepCosts& costs, const SdPlanOptions& options);

// The analytic plan (`moelab plan sd`).
SdPlan PlanSpeculativeDecoding(const MoeModelSpec& target, const MoeModelSpec& draft,
                               const HardwareSpec& hardware, const CostParameters& params,
                               const SdPlanOptions& options);

}  // namespace moelab
