#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fit/latency_fit.h"
#include "model/cost_source.h"
#include "model/model_spec.h"
#include "model/profiled_model.h"

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
// plus lm_head once (over the positions that need logits), and for a beam step's ranked rows
// beam_selection(rows) when the profile measured it (older profiles: not priced). A dense model
// (the SD draft): its one-token pass over a cache is the draft_decode curves of its shape at x =
// batch, interpolated in context as decode attention, when the profile measured them (the whole
// pass: norms, residual adds and per-operator dispatch included, which at the draft's size are a
// third of its time); otherwise dense_ffn per layer, the attention curve scaled by its bytes over
// the profiled target's (the projection weights and the KV cache each in their share of the
// target's bytes), and the LM head scaled by its hidden size over the target's. With the measured
// pass, a pass of several tokens (the catch-up after a fully accepted round) is that composition
// times the one-token pass's measured / composed ratio, and every breakdown is the composition's. A
// pass with ForwardShape::after_own_pass (a round's second and later draft passes) takes the
// draft_decode_warm curves instead, measured on a pass right after another, when the profile has
// them (older profiles: priced as the first pass). The
// embedding lookup (one row copy per token and pass, under 0.1 % here) is left out; the SD
// acceptance step is taken as zero.
//
// The cache regime: every curve above was measured with its weights cycled through more than
// twice the cache (from DRAM). A run whose passes cycle through less (a small model, or an
// offloaded one whose RAM expert cache is small: ForwardShape::working_set_bytes, by default the
// whole model with the pass's KV cache) streams its weights from the cache instead. When the
// profile measured expert_ffn_working_set (the expert FFN with its weights cycled over working
// sets up to the DRAM regime's, at a few token counts), every weight-reading operator of a MoE
// model's pass -- routed experts at their tokens per expert, attention at its batch (prefill and
// verify: all their rows), router, dense FFN and LM head at their rows -- is its curve's time
// times CacheRatio(rows, working set); norms and residual adds read no weights and keep theirs.
// A dense model's pass (the SD draft) stays in the regime it was measured in.
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
  double ExpertSeconds(const model::MoeModelSpec& model, int64_t tokens,
                       double working_set_bytes) const override;
  double RejectSeconds(const model::MoeModelSpec& target, int64_t batch,
                       int64_t gamma) const override;
  model::MemoryFootprint Memory(const model::MoeModelSpec& model, double kv_tokens) const override;
  nlohmann::json Describe() const override;

  // A weight-reading call of `rows` rows (tokens per expert, or a matmul's rows) in a run cycling
  // through `working_set_bytes`, over the same call from DRAM: expert_ffn_working_set's time at the
  // working set over the faster of its time at the largest (the DRAM regime) and expert_ffn's (the
  // same call, measured twice; interference only adds time), at `rows` (each curve read through
  // its measured points where it has the interpolated form); linear in the working
  // set between the profiled ones, the smallest's ratio below them, 1 from the largest up; above
  // the largest profiled row count, the time the cache saved there (the same weights streamed)
  // taken from expert_ffn's time at `rows`. Never above 1: a cache does not slow a read, so a
  // ratio over 1 is the profile's noise. 1 when the fit has fewer than two working sets on this
  // device. The curves must be of expert_ffn's expert (else the constructor's error).
  double CacheRatio(int64_t rows, double working_set_bytes) const;
  // The working set a pass of `model` at `shape` cycles through (ForwardShape::working_set_bytes,
  // or the whole model with the pass's fp32 KV cache).
  static double WorkingSetOf(const model::MoeModelSpec& model, const model::ForwardShape& shape);

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
  // The draft_decode (warm: draft_decode_warm) curves measured on `model`'s shape, by context;
  // may be empty.
  std::vector<const OperatorCurve*> DraftDecodeCurves(const model::MoeModelSpec& model,
                                                      bool warm = false) const;
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
  // What the curves measured, as Forward checks it: target_'s layer shape and weight bits.
  model::ProfiledModel measured_;
  // expert_ffn_working_set's curves on device_: (working set bytes, index in fit_.operators), by
  // working set.
  std::vector<std::pair<double, size_t>> working_set_curves_;
  model::MoeModelSpec target_;
  std::string device_;
  std::string device_name_;
};

}  // namespace moelab::fit
