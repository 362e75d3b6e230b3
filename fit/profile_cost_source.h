#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fit/latency_fit.h"
#include "model/cost_source.h"
#include "model/model_spec.h"

namespace moelab::fit {

// The "fitted-profile" cost source: operator times from the latency curves `moelab fit latency`
// fitted to a measured profile. It predicts the profiled machine's `device` ("cpu" or "gpu") for
// the profiled layer shapes (the executor's), so `moelab run` can check it. Per layer, with n =
// batch x tokens per sequence:
//   attention: decode (one token per sequence): the attention_decode curves at x = n,
//              interpolated linearly in context between the profiled contexts around the pass's,
//              extrapolated above the largest, the smallest's below it; verify (q > 1 tokens per
//              sequence over a non-empty cache): the attention_verify curves at x = batch, each
//              profiled q's curves interpolated in context as decode's, then linearly in q between
//              the profiled q around the pass's (q = 1 is decode at x = batch), continuing the
//              last segment above the largest; a fit without attention_verify curves (profiles
//              made before them) prices verify as decode at x = n (each position an extra
//              sequence over about the same context, which over-prices it: the positions of one
//              sequence share its cache); prefill (empty cache, several tokens): batch x the
//              attention_prefill curve at the prompt length;
//   router:    router(n);  routed experts: N(n) activated experts (the shape's routing, uniform
//              by default: formulas.md) x expert_ffn(n K / N(n));  dense layers: dense_ffn(n);
//   norms and residual adds: norms_residual(n) (two RMSNorms and two residual adds, what the
//              executor times as "other"), when the profile measured it (older profiles: not
//              priced);
// plus lm_head once (over the positions that need logits). A dense model (the SD draft): its
// one-token pass over a cache is the draft_decode curves of its shape at x = batch, interpolated in
// context as decode attention, when the profile measured them (the whole pass: norms, residual
// adds and per-operator dispatch included, which at the draft's size are a third of its time);
// otherwise dense_ffn per layer, the attention curve scaled by its bytes over the profiled
// target's (the projection weights and the KV cache each in their share of the target's bytes),
// and the LM head scaled by its hidden size over the target's. With the measured pass, a pass of
// several tokens (the catch-up after a fully accepted round) is that composition times the
// one-token pass's measured / composed ratio, and every breakdown is the composition's. The
// embedding lookup (one row copy per token and pass, under 0.1 % here) is left out; the SD
// acceptance step is taken as zero.
class FittedProfileCostSource : public model::CostSource {
 public:
  // `profiled_target`: the MoE model the profile measured. Errors (naming the fit's file): a dense
  // or non-GQA target, a missing curve, no curve on `device`.
  FittedProfileCostSource(LatencyFit fit, model::MoeModelSpec profiled_target,
                          std::string device = "cpu");

  std::string name() const override { return "fitted-profile"; }
  std::string device() const override { return device_name_; }
  std::string compute_dtype() const override { return "bf16"; }
  model::ForwardCost Forward(const model::MoeModelSpec& model,
                             const model::ForwardShape& shape) const override;
  double ExpertSeconds(const model::MoeModelSpec& model, int64_t tokens) const override;
  double RejectSeconds(const model::MoeModelSpec& target, int64_t batch,
                       int64_t gamma) const override;
  model::MemoryFootprint Memory(const model::MoeModelSpec& model, double kv_tokens) const override;
  nlohmann::json Describe() const override;

  // A curve over bytes (memcpy_host, storage_read) when the fit has one, else nullptr.
  const OperatorCurve* BytesCurve(const std::string& op) const;
  const LatencyFit& fit() const { return fit_; }
  // Whether `fit` has curves measured on `device`.
  static bool HasDevice(const LatencyFit& fit, const std::string& device);

 private:
  const OperatorCurve& Curve(const std::string& op) const;            // over tokens, on device_
  const OperatorCurve* CurveIfProfiled(const std::string& op) const;  // the same, or nullptr
  // `op`'s curves on device_ by profiled context (attention_verify: those of `queries`).
  std::vector<const OperatorCurve*> ContextCurves(const std::string& op, int64_t queries) const;
  std::vector<const OperatorCurve*> DecodeAttentionCurves() const;  // non-empty, or throws
  // The draft_decode curves measured on `model`'s shape, by context; may be empty.
  std::vector<const OperatorCurve*> DraftDecodeCurves(const model::MoeModelSpec& model) const;
  std::vector<int64_t> VerifyQueries()
      const;  // profiled queries per sequence, sorted; may be empty
  double ContextInterpolatedSeconds(const std::vector<const OperatorCurve*>& curves,
                                    int64_t context, double x) const;
  double VerifyAttentionSeconds(const std::vector<int64_t>& profiled, int64_t queries,
                                int64_t context, double batch) const;
  double AttentionSeconds(
      const model::ForwardShape& shape) const;  // one layer of the profiled target
  // Another model's attention over the profiled target's, at `shape` (1 for the target).
  double AttentionScale(const model::MoeModelSpec& model, const model::ForwardShape& shape) const;

  LatencyFit fit_;
  model::MoeModelSpec target_;
  std::string device_;
  std::string device_name_;
};

}  // namespace moelab::fit
