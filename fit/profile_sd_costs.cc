#include "fit/profile_sd_costs.h"

#include <cmath>

#include "base/error.h"
#include "model/moe_math.h"
#include "model/parameter_count.h"

namespace moelab {

ProfileSdStepCosts::ProfileSdStepCosts(LatencyFit fit, const MoeModelSpec& target, const MoeModelSpec& draft,
                                       int64_t context_length)
    : fit_(std::move(fit)), target_(target), draft_(draft), context_length_(context_length) {
  if (!target.moe) throw Error("a fitted-profile SD sweep needs an MoE target; '" + target.name + "' is dense");
  if (target.attention.kind != AttentionKind::kGroupedQuery || draft.attention.kind != AttentionKind::kGroupedQuery) {
    throw Error("the fitted-profile cost source covers grouped-query attention models (the executor's)");
  }
  if (draft.vocab_size != target.vocab_size) {
    throw Error("draft '" + draft.name + "' and target '" + target.name + "' must share a vocabulary");
  }
  double best_distance = INFINITY;
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op != "attention_decode" || !curve.shape.contains("context")) continue;
    const int64_t context = curve.shape["context"].get<int64_t>();
    const double distance = std::fabs(std::log((static_cast<double>(context) + 1.0) / (static_cast<double>(context_length) + 1.0)));
    if (distance < best_distance) {
      best_distance = distance;
      attention_ = &curve;
      attention_context_ = context;
    }
  }
  if (attention_ == nullptr) throw Error(fit_.profile + ": the fit has no attention_decode curve");
  for (const char* op : {"expert_ffn", "router", "lm_head", "dense_ffn"}) Curve(op);  // all present, or a clear error
  device_ = fit_.machine.contains("cpu") && fit_.machine["cpu"].is_string() ? fit_.machine["cpu"].get<std::string>()
                                                                             : std::string("profiled machine");
}

const OperatorCurve& ProfileSdStepCosts::Curve(const std::string& op) const {
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op == op && curve.variable == "tokens") return curve;
  }
  throw Error(fit_.profile + ": the fit has no '" + op + "' curve over tokens (profile the model with `moelab profile`)");
}

double ProfileSdStepCosts::Attention(double tokens) const { return attention_->Predict(tokens); }

double ProfileSdStepCosts::TargetStep(int64_t batch, int64_t positions) {
  auto [it, inserted] = target_steps_.try_emplace({batch, positions}, 0.0);
  if (!inserted) return it->second;
  const double n = static_cast<double>(batch * positions);
  const MoeSpec& moe = *target_.moe;
  const double activated = ExpectedActivatedExperts(n, moe.num_experts, moe.top_k);
  const double per_expert = n * static_cast<double>(moe.top_k) / activated;
  const double moe_layer = Attention(n) + Curve("router").Predict(n) + activated * Curve("expert_ffn").Predict(per_expert);
  const double dense_layer = Attention(n) + (target_.num_dense_layers() > 0 ? Curve("dense_ffn").Predict(n) : 0.0);
  it->second = static_cast<double>(target_.num_moe_layers()) * moe_layer +
               static_cast<double>(target_.num_dense_layers()) * dense_layer + Curve("lm_head").Predict(n);
  return it->second;
}

double ProfileSdStepCosts::DraftStep(int64_t batch) {
  const double b = static_cast<double>(batch);
  const double kv_ratio = static_cast<double>(draft_.attention.num_kv_heads * draft_.attention.head_dim) /
                          static_cast<double>(target_.attention.num_kv_heads * target_.attention.head_dim);
  const double hidden_ratio = static_cast<double>(draft_.hidden_size) / static_cast<double>(target_.hidden_size);
  return static_cast<double>(draft_.num_layers) * (Curve("dense_ffn").Predict(b) + kv_ratio * Attention(b)) +
         hidden_ratio * Curve("lm_head").Predict(b);
}

double ProfileSdStepCosts::Reject(int64_t batch, int64_t gamma) {
  // Acceptance is a few passes over the vocabulary per verified position, not profiled; taken as
  // zero (small next to a forward pass; docs/model.md section 8).
  (void)batch;
  (void)gamma;
  return 0.0;
}

bool ProfileSdStepCosts::Fits(int64_t batch, int64_t gamma) {
  if (!fit_.machine.contains("memory_bytes") || !fit_.machine["memory_bytes"].is_number()) return true;
  const double kv_tokens = static_cast<double>(batch) * static_cast<double>(context_length_ + gamma + 1);
  const double bytes = CountWeightBytes(target_).total + CountWeightBytes(draft_).total +
                       kv_tokens * static_cast<double>(KvCacheBytesPerToken(target_, 32) + KvCacheBytesPerToken(draft_, 32));
  return bytes <= fit_.machine["memory_bytes"].get<double>();
}

}  // namespace moelab
