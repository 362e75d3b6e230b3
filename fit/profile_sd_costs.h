#pragma once

#include <map>
#include <string>

#include "fit/latency_fit.h"
#include "model/model_spec.h"
#include "model/sd_plan.h"

namespace moelab {

// SD step times from the fitted latency curves of a measured profile (`moelab fit latency`): the
// "measured profile" cost source of `moelab sim sd --profile FIT.json`. It predicts the machine
// that was profiled, for the profiled model shape (the executor's), so `moelab run --workload sd`
// can check it. Per target layer, with n = batch x positions tokens:
//   attention: the attention_decode curve at x = n, from the profiled context nearest the
//              requested one (verify positions counted as extra sequences: each attends to about
//              the same context);
//   router:    router(n);
//   experts:   N(n) activated experts (uniform routing, formulas.md) x expert_ffn(n K / N(n));
// plus lm_head(n) once. The draft: its layers x (dense_ffn(batch) + the target's attention curve
// scaled by the draft's KV width / the target's) + lm_head scaled by hidden size. Norms and
// residual adds are not profiled and are left out (a few percent at these shapes).
class ProfileSdStepCosts : public SdStepCosts {
 public:
  ProfileSdStepCosts(LatencyFit fit, const MoeModelSpec& target, const MoeModelSpec& draft, int64_t context_length);

  std::string source() const override { return "fitted-profile"; }
  std::string device() const override { return device_; }
  std::string compute_dtype() const override { return "bf16"; }
  double TargetStep(int64_t batch, int64_t positions) override;
  double DraftStep(int64_t batch) override;
  double Reject(int64_t batch, int64_t gamma) override;
  bool Fits(int64_t batch, int64_t gamma) override;

  int64_t attention_context() const { return attention_context_; }

 private:
  const OperatorCurve& Curve(const std::string& op) const;
  double Attention(double tokens) const;

  LatencyFit fit_;
  const MoeModelSpec& target_;
  const MoeModelSpec& draft_;
  int64_t context_length_;
  const OperatorCurve* attention_ = nullptr;
  int64_t attention_context_ = 0;
  std::string device_;
  std::map<std::pair<int64_t, int64_t>, double> target_steps_;
};

}  // namespace moelab
