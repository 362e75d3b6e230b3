#include "fit/profile_cost_source.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "base/error.h"
#include "model/expert_activation.h"
#include "model/moe_math.h"
#include "model/parameter_count.h"

namespace moelab::fit {
namespace {

constexpr const char* kVerifyOp = "attention_verify";
constexpr const char* kDraftOp = "draft_decode";
constexpr const char* kDraftWarmOp = "draft_decode_warm";
constexpr const char* kWorkingSetOp = "expert_ffn_working_set";

// Whether a draft_decode curve's shape is `model`'s (the pass it measured is this model's).
bool IsModelOf(const nlohmann::json& shape, const model::MoeModelSpec& model) {
  const auto is = [&](const char* key, int64_t value) {
    return shape.contains(key) && shape[key].is_number_integer() &&
           shape[key].get<int64_t>() == value;
  };
  return is("layers", model.num_layers) && is("hidden", model.hidden_size) &&
         is("intermediate", model.dense_intermediate_size) &&
         is("heads", model.attention.num_heads) && is("kv_heads", model.attention.num_kv_heads) &&
         is("head_dim", model.attention.head_dim) && is("vocab", model.vocab_size);
}

}  // namespace

bool FittedProfileCostSource::HasDevice(const LatencyFit& fit, const std::string& device) {
  for (const OperatorCurve& curve : fit.operators) {
    if (curve.device == device) return true;
  }
  return false;
}

FittedProfileCostSource::FittedProfileCostSource(LatencyFit fit,
                                                 model::MoeModelSpec profiled_target,
                                                 std::string device)
    : fit_(std::move(fit)), target_(std::move(profiled_target)), device_(std::move(device)) {
  if (!target_.moe)
    throw base::Error("a fitted-profile cost source needs the profiled MoE model; '" +
                      target_.name + "' is dense");
  if (target_.attention.kind != model::AttentionKind::kGroupedQuery) {
    throw base::Error(
        "the fitted-profile cost source covers grouped-query attention models (the executor's)");
  }
  // What the curves were measured on, as far as Forward checks it: the profiled target's layer
  // shape and weight bits (the chooser checked the target against the fit's recorded facts).
  measured_ = model::ProfiledModel::Of(target_);
  measured_.origin = fit_.profile;
  if (!HasDevice(fit_, device_))
    throw base::Error(fit_.profile + ": the fit has no curves measured on device '" + device_ +
                      "'");
  DecodeAttentionCurves();  // present, or a clear error
  for (const char* op : {"expert_ffn", "router", "lm_head", "dense_ffn"}) Curve(op);
  for (size_t i = 0; i < fit_.operators.size(); ++i) {
    const OperatorCurve& curve = fit_.operators[i];
    if (curve.op != kWorkingSetOp || curve.device != device_ || curve.variable != "tokens")
      continue;
    if (!curve.shape.contains("working_set_bytes") ||
        !curve.shape["working_set_bytes"].is_number() ||
        !(curve.shape["working_set_bytes"].get<double>() > 0)) {
      throw base::Error(fit_.profile + ": an " + std::string(kWorkingSetOp) +
                        " curve has no positive shape.working_set_bytes (in " + curve.shape.dump() +
                        ")");
    }
    // The expert the ratios are for: the profiled target's, as expert_ffn measured it.
    nlohmann::json shape = curve.shape;
    shape.erase("working_set_bytes");
    if (shape != Curve("expert_ffn").shape) {
      throw base::Error(fit_.profile + ": an " + std::string(kWorkingSetOp) + " curve (shape " +
                        curve.shape.dump() + ") is not of expert_ffn's expert (" +
                        Curve("expert_ffn").shape.dump() + ")");
    }
    working_set_curves_.emplace_back(curve.shape["working_set_bytes"].get<double>(), i);
  }
  std::sort(working_set_curves_.begin(), working_set_curves_.end());
  device_name_ = fit_.machine.contains("cpu") && fit_.machine["cpu"].is_string()
                     ? fit_.machine["cpu"].get<std::string>()
                     : std::string("profiled machine");
}

const OperatorCurve* FittedProfileCostSource::CurveIfProfiled(const std::string& op) const {
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op == op && curve.variable == "tokens" && curve.device == device_) return &curve;
  }
  return nullptr;
}

const OperatorCurve& FittedProfileCostSource::Curve(const std::string& op) const {
  if (const OperatorCurve* curve = CurveIfProfiled(op)) return *curve;
  throw base::Error(fit_.profile + ": the fit has no '" + op +
                    "' curve over tokens (profile the model with `moelab profile`)");
}

const OperatorCurve* FittedProfileCostSource::BytesCurve(const std::string& op) const {
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op == op && curve.variable == "bytes") return &curve;
  }
  return nullptr;
}

std::vector<const OperatorCurve*> FittedProfileCostSource::ContextCurves(const std::string& op,
                                                                         int64_t queries) const {
  std::vector<const OperatorCurve*> curves;
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op != op || curve.device != device_ || !curve.shape.contains("context")) continue;
    if (op == kVerifyOp && (!curve.shape.contains("queries_per_sequence") ||
                            curve.shape["queries_per_sequence"] != queries))
      continue;
    curves.push_back(&curve);
  }
  std::sort(curves.begin(), curves.end(), [](const OperatorCurve* a, const OperatorCurve* b) {
    return a->shape["context"].get<int64_t>() < b->shape["context"].get<int64_t>();
  });
  return curves;
}

std::vector<const OperatorCurve*> FittedProfileCostSource::DraftDecodeCurves(
    const model::MoeModelSpec& model, bool warm) const {
  std::vector<const OperatorCurve*> curves = ContextCurves(warm ? kDraftWarmOp : kDraftOp, 1);
  std::erase_if(curves,
                [&](const OperatorCurve* curve) { return !IsModelOf(curve->shape, model); });
  return curves;
}

std::vector<const OperatorCurve*> FittedProfileCostSource::DecodeAttentionCurves() const {
  std::vector<const OperatorCurve*> curves = ContextCurves("attention_decode", 1);
  if (curves.empty()) throw base::Error(fit_.profile + ": the fit has no attention_decode curve");
  return curves;
}

std::vector<int64_t> FittedProfileCostSource::VerifyQueries() const {
  std::vector<int64_t> queries;
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op == kVerifyOp && curve.device == device_ && curve.shape.contains("context") &&
        curve.shape.contains("queries_per_sequence") &&
        curve.shape["queries_per_sequence"].is_number_integer())
      queries.push_back(curve.shape["queries_per_sequence"].get<int64_t>());
  }
  std::sort(queries.begin(), queries.end());
  queries.erase(std::unique(queries.begin(), queries.end()), queries.end());
  return queries;
}

double FittedProfileCostSource::ContextInterpolatedSeconds(
    const std::vector<const OperatorCurve*>& curves, int64_t context, double x) const {
  // Attention over a cache reads every cached position, so at a fixed x its time is affine in the
  // context: interpolate between the two profiled contexts around it, extrapolate beyond the
  // largest along the last two. Below the smallest profiled context its curve is used as is
  // (extrapolating the noisy slope down can cross zero; the context-dependent part is smallest
  // there).
  const auto context_of = [](const OperatorCurve* curve) {
    return curve->shape["context"].get<int64_t>();
  };
  if (curves.size() == 1 || context <= context_of(curves.front()))
    return curves.front()->Predict(x);
  size_t upper = 1;
  while (upper + 1 < curves.size() && context_of(curves[upper]) < context) ++upper;
  const OperatorCurve& lo = *curves[upper - 1];
  const OperatorCurve& hi = *curves[upper];
  const double c0 = static_cast<double>(context_of(&lo)), c1 = static_cast<double>(context_of(&hi));
  const double t0 = lo.Predict(x), t1 = hi.Predict(x);
  const double interpolated = t0 + (t1 - t0) * (static_cast<double>(context) - c0) / (c1 - c0);
  if (!(interpolated > 0)) {
    throw base::Error(fit_.profile + ": the " + lo.op + " curves at contexts " +
                      std::to_string(static_cast<int64_t>(c0)) + " and " +
                      std::to_string(static_cast<int64_t>(c1)) +
                      " extrapolate to a non-positive time at context " + std::to_string(context) +
                      " (a noisy profile: re-profile, or profile this context)");
  }
  return interpolated;
}

double FittedProfileCostSource::VerifyAttentionSeconds(const std::vector<int64_t>& profiled,
                                                       int64_t queries, int64_t context,
                                                       double batch) const {
  // Knots along the queries per sequence: q = 1 is decode attention at x = batch (one query per
  // sequence), then every profiled verify q. Between knots the time is interpolated linearly (the
  // projection rows and the per-query score work both grow with q); above the largest it
  // continues the last segment.
  std::vector<int64_t> knots = {1};
  knots.insert(knots.end(), profiled.begin(), profiled.end());
  const auto at = [&](int64_t q) {
    return q == 1 ? ContextInterpolatedSeconds(DecodeAttentionCurves(), context, batch)
                  : ContextInterpolatedSeconds(ContextCurves(kVerifyOp, q), context, batch);
  };
  size_t upper = 1;
  while (upper + 1 < knots.size() && knots[upper] < queries) ++upper;
  const double q0 = static_cast<double>(knots[upper - 1]), q1 = static_cast<double>(knots[upper]);
  const double t0 = at(knots[upper - 1]), t1 = at(knots[upper]);
  const double seconds = t0 + (t1 - t0) * (static_cast<double>(queries) - q0) / (q1 - q0);
  if (!(seconds > 0)) {
    throw base::Error(fit_.profile + ": the attention curves at " +
                      std::to_string(knots[upper - 1]) + " and " + std::to_string(knots[upper]) +
                      " queries per sequence extrapolate to a non-positive time at " +
                      std::to_string(queries) + " (a noisy profile: re-profile)");
  }
  return seconds;
}

double FittedProfileCostSource::AttentionSeconds(const model::ForwardShape& shape) const {
  const double batch = static_cast<double>(shape.batch);
  const double prompt = static_cast<double>(shape.tokens_per_sequence);
  const model::PassKind kind = model::PassKindOf(shape);
  const OperatorCurve* prefill = nullptr;
  for (const OperatorCurve& curve : fit_.operators) {
    if (curve.op == "attention_prefill" && curve.device == device_) prefill = &curve;
  }
  if (kind == model::PassKind::kPrefill) {
    if (prefill == nullptr) {
      throw base::Error(fit_.profile +
                        ": the fit has no attention_prefill curve, needed for a prefill pass");
    }
    return batch * prefill->Predict(prompt);
  }
  const std::vector<int64_t> profiled = VerifyQueries();
  if (kind == model::PassKind::kVerify && !shape.logits_for_all_positions && prefill != nullptr &&
      !profiled.empty() && shape.tokens_per_sequence > profiled.back()) {
    // A prompt's chunk after `context` of its tokens (chunked prefill), longer than any profiled
    // verify pass: the same work as the last q rows of a prefill of context + q tokens (q
    // projections, q x context cached and q (q + 1) / 2 in-chunk query-key pairs), so it is that
    // prefill's time less the first context tokens'. The verify curves' last segment (q of 2..9
    // drafts), extended to a chunk of 60 queries, would carry the profile's noise with it (it
    // has crossed zero). A fit without verify curves prices it as before (decode rows, below):
    // older fits keep predicting what they did.
    const double context = static_cast<double>(shape.context_length);
    const double seconds = prefill->Predict(context + prompt) - prefill->Predict(context);
    if (!(seconds > 0)) {
      throw base::Error(fit_.profile + ": the attention_prefill curve does not grow from " +
                        std::to_string(shape.context_length) + " to " +
                        std::to_string(shape.context_length + shape.tokens_per_sequence) +
                        " tokens (a noisy profile: re-profile), needed for a prefill chunk");
    }
    return batch * seconds;
  }
  if (kind == model::PassKind::kVerify) {
    if (!profiled.empty()) {
      return VerifyAttentionSeconds(profiled, shape.tokens_per_sequence, shape.context_length,
                                    batch);
    }
    // A fit without attention_verify (profiles before it): each verify position priced as one
    // more decode sequence over about the same context.
  }
  return ContextInterpolatedSeconds(DecodeAttentionCurves(), shape.context_length, batch * prompt);
}

double FittedProfileCostSource::AttentionScale(const model::MoeModelSpec& model,
                                               const model::ForwardShape& shape) const {
  // The profiled attention reads two things: the q|k|v and o projections' weights (once per pass)
  // and every sequence's cached keys and values. Another model's attention is the profiled time
  // split in those bytes' proportion, each part scaled by the model's own bytes over the target's.
  const auto projection_params = [](const model::MoeModelSpec& m) {
    const double h = static_cast<double>(m.hidden_size);
    const double q = static_cast<double>(m.attention.num_heads * m.attention.head_dim);
    const double kv = static_cast<double>(m.attention.num_kv_heads * m.attention.head_dim);
    return h * (q + 2.0 * kv) + q * h;
  };
  const auto kv_bytes = [&](const model::MoeModelSpec& m) {
    const double positions =
        static_cast<double>(shape.context_length) + static_cast<double>(shape.tokens_per_sequence);
    return static_cast<double>(shape.batch) * positions * 2.0 *
           static_cast<double>(m.attention.num_kv_heads * m.attention.head_dim) *
           4.0;  // fp32 keys and values
  };
  const double target_projection = 2.0 * projection_params(target_), target_kv = kv_bytes(target_);
  const double projection_share = target_projection / (target_projection + target_kv);
  return projection_share * projection_params(model) / projection_params(target_) +
         (1.0 - projection_share) * kv_bytes(model) / target_kv;
}

double FittedProfileCostSource::CacheRatio(int64_t rows, double working_set_bytes) const {
  if (working_set_curves_.size() < 2 || working_set_bytes >= working_set_curves_.back().first)
    return 1.0;
  const OperatorCurve& dram = fit_.operators[working_set_curves_.back().second];
  // Read at the measured points (the interpolated form, where fitted): the ratio of two smooth
  // fits would carry both fits' misfit.
  const auto seconds = [](const OperatorCurve& curve, int64_t at) {
    const LatencyFormFit* knots = curve.Form(LatencyForm::kInterpolated);
    return knots ? EvaluateLatencyForm(LatencyForm::kInterpolated, knots->params,
                                       static_cast<double>(ComputedTokens(curve.shape, at)))
                 : curve.PredictTokens(at);
  };
  // The call from DRAM was measured twice: as the family's DRAM regime and as expert_ffn itself.
  // A shared machine's interference only ever adds time, so the faster of the two is the better
  // estimate; one disturbed DRAM point (a validation's 1-token point read 654 us where expert_ffn
  // read 160, which priced the whole pass at a tenth of its DRAM time) no longer makes the cache
  // look faster than it is.
  const OperatorCurve& expert_ffn = Curve("expert_ffn");
  const auto from_dram = [&](int64_t at) {
    return std::min(seconds(dram, at), seconds(expert_ffn, at));
  };
  const auto ratio_at = [&](size_t k) {
    const OperatorCurve& curve = fit_.operators[working_set_curves_[k].second];
    const int64_t largest = static_cast<int64_t>(curve.x_max);
    if (rows <= largest) return std::min(1.0, seconds(curve, rows) / from_dram(rows));
    // Past the largest profiled call the cache saves what it saved there (streaming the same
    // weights), a smaller share of a longer, compute-bound call (expert_ffn's time at `rows`).
    const double saved = std::max(0.0, from_dram(largest) - seconds(curve, largest));
    return std::min(1.0, 1.0 - saved / expert_ffn.PredictTokens(rows));
  };
  if (working_set_bytes <= working_set_curves_.front().first) return ratio_at(0);
  size_t upper = 1;
  while (working_set_curves_[upper].first < working_set_bytes) ++upper;
  const double w0 = working_set_curves_[upper - 1].first, w1 = working_set_curves_[upper].first;
  const double r0 = ratio_at(upper - 1), r1 = ratio_at(upper);
  return r0 + (r1 - r0) * (working_set_bytes - w0) / (w1 - w0);
}

double FittedProfileCostSource::WorkingSetOf(const model::MoeModelSpec& model,
                                             const model::ForwardShape& shape) {
  if (shape.working_set_bytes > 0) return shape.working_set_bytes;
  const double positions = static_cast<double>(shape.context_length + shape.tokens_per_sequence) *
                           static_cast<double>(shape.batch);
  const double experts =
      model.moe ? static_cast<double>(model.num_moe_layers() * model.moe->num_experts) : 0.0;
  return model::PassWorkingSetBytes(
      model, experts, positions * static_cast<double>(model::KvCacheBytesPerToken(model, 32)));
}

model::ForwardCost FittedProfileCostSource::Forward(const model::MoeModelSpec& model,
                                                    const model::ForwardShape& shape) const {
  shape.Validate();
  const int64_t tokens = shape.batch * shape.tokens_per_sequence;
  const double n = static_cast<double>(tokens);
  const int64_t logit_tokens = shape.logits_for_all_positions ? tokens : shape.batch;
  const double layers = static_cast<double>(model.num_layers);
  model::ForwardCost cost;
  if (model.moe) {
    // Its layers are the profiled target's (the number of them may differ: a held-out shape),
    // in the weight formats measured: others would be other kernels and other bytes.
    model::ProfiledModel priced = model::ProfiledModel::Of(model);
    priced.name.reset();
    priced.shape.layers.reset();
    measured_.Require(priced, "'" + model.name + "' priced");
    const model::MoeSpec& moe = *model.moe;
    const double moe_layers = static_cast<double>(model.num_moe_layers());
    const double dense_layers = static_cast<double>(model.num_dense_layers());
    const double activated = model::ActivatedExpertsPerLayer(moe, shape);
    const double per_expert = n * static_cast<double>(moe.top_k) / activated;
    // Each weight-reading operator at its rows, in the run's cache regime (CacheRatio).
    const double working_set = WorkingSetOf(model, shape);
    const auto cached = [&](int64_t rows) { return CacheRatio(rows, working_set); };
    const int64_t attention_rows = model::PassKindOf(shape) == model::PassKind::kDecode
                                       ? shape.batch
                                       : tokens;  // verify: every query; prefill: the prompt
    cost.Add(model::Operator::kAttention, 0, 0,
             layers * AttentionSeconds(shape) * cached(attention_rows));
    cost.Add(model::Operator::kRouter, 0, 0,
             moe_layers * Curve("router").PredictTokens(tokens) * cached(tokens));
    // Over the pass's tokens-per-expert spread: the curve changes regime between tile sizes, so
    // pricing every expert at the mean load would miss (Jensen).
    const model::ExpertLoad load = model::ExpertLoadPerLayer(moe, shape);
    const OperatorCurve& expert_ffn = Curve("expert_ffn");
    double routed_s = 0;
    for (size_t i = 0; i < load.experts.size(); ++i) {
      if (load.experts[i] > 0) {
        const int64_t expert_tokens = load.first_tokens + static_cast<int64_t>(i);
        routed_s +=
            load.experts[i] * expert_ffn.PredictTokens(expert_tokens) * cached(expert_tokens);
      }
    }
    cost.Add(model::Operator::kRoutedExperts, 0, 0, moe_layers * routed_s);
    if (dense_layers > 0)
      cost.Add(model::Operator::kDenseFfn, 0, 0,
               dense_layers * Curve("dense_ffn").PredictTokens(tokens) * cached(tokens));
    cost.Add(model::Operator::kLmHead, 0, 0,
             Curve("lm_head").PredictTokens(logit_tokens) * cached(logit_tokens));
    // The executor's "other": about 1 % of a prefill and half that of a decode step here, but in
    // every pass, so a prediction without it is low by that much everywhere.
    if (const OperatorCurve* norms = CurveIfProfiled("norms_residual"))
      cost.Add(model::Operator::kNormsResidual, 0, 0, layers * norms->PredictTokens(tokens));
    // A beam step's ranking over the vocabulary (1-2 % of a beam step on the validate shape); a
    // profile from before the family priced none, as for norms_residual.
    if (const OperatorCurve* ranking = CurveIfProfiled("beam_selection");
        ranking && shape.ranked_rows > 0) {
      cost.Add(model::Operator::kBeamSelection, 0, 0, ranking->PredictTokens(shape.ranked_rows));
    }
    cost.activated_experts_per_layer = activated;
    cost.tokens_per_activated_expert = per_expert;
  } else {
    if (model.vocab_size != target_.vocab_size) {
      throw base::Error(fit_.profile + ": the LM head was profiled with the vocabulary of '" +
                        target_.name + "' (" + std::to_string(target_.vocab_size) + "); '" +
                        model.name + "' has " + std::to_string(model.vocab_size));
    }
    const double hidden_ratio =
        static_cast<double>(model.hidden_size) / static_cast<double>(target_.hidden_size);
    // The draft composed from the target's per-operator curves: FFN, attention, LM head.
    const auto composed = [&](const model::ForwardShape& pass) {
      const int64_t rows = pass.batch * pass.tokens_per_sequence;
      const int64_t logit_rows = pass.logits_for_all_positions ? rows : pass.batch;
      return std::array<double, 3>{layers * Curve("dense_ffn").PredictTokens(rows),
                                   layers * AttentionScale(model, pass) * AttentionSeconds(pass),
                                   hidden_ratio * Curve("lm_head").PredictTokens(logit_rows)};
    };
    std::array<double, 3> parts = composed(shape);
    // The draft's one-token pass measured whole (draft_decode, this model's shape) carries what
    // the composition leaves out; a pass of several tokens (the catch-up after a fully accepted
    // round) keeps the one-token pass's measured / composed ratio. The breakdown is the
    // composition's (the measurement has none).
    std::vector<const OperatorCurve*> measured = DraftDecodeCurves(model);
    if (shape.after_own_pass) {
      std::vector<const OperatorCurve*> warm = DraftDecodeCurves(model, true);
      if (!warm.empty()) measured = std::move(warm);
    }
    if (!measured.empty() && shape.context_length > 0) {
      const model::ForwardShape one{shape.batch, 1, shape.context_length, true};
      const std::array<double, 3> one_parts = composed(one);
      const double ratio = ContextInterpolatedSeconds(measured, shape.context_length,
                                                      static_cast<double>(shape.batch)) /
                           (one_parts[0] + one_parts[1] + one_parts[2]);
      for (double& part : parts) part *= ratio;
    }
    const double ffn_s = parts[0], attention_s = parts[1], lm_head_s = parts[2];
    cost.Add(model::Operator::kDenseFfn, 0, 0, ffn_s);
    cost.Add(model::Operator::kAttention, 0, 0, attention_s);
    cost.Add(model::Operator::kLmHead, 0, 0, lm_head_s);
  }
  cost.Total();
  cost.device = device_name_;
  cost.compute_dtype = compute_dtype();
  return cost;
}

double FittedProfileCostSource::ExpertSeconds(const model::MoeModelSpec& model, int64_t tokens,
                                              double working_set_bytes) const {
  if (!model.moe)
    throw base::Error("model '" + model.name + "' is dense: it has no routed experts");
  if (tokens < 1)
    throw base::Error("an expert runs for at least one token, got " + std::to_string(tokens));
  if (!(working_set_bytes >= 0))
    throw base::Error("working set must be >= 0 bytes, got " + std::to_string(working_set_bytes));
  model::ForwardShape whole;  // the whole model resident, without a KV cache
  whole.working_set_bytes = working_set_bytes;
  return Curve("expert_ffn").PredictTokens(tokens) * CacheRatio(tokens, WorkingSetOf(model, whole));
}

double FittedProfileCostSource::RejectSeconds(const model::MoeModelSpec&, int64_t, int64_t) const {
  // Acceptance is a few passes over the vocabulary per verified position, not profiled; taken as
  // zero (small next to a forward pass; docs/model.md section 8).
  return 0.0;
}

model::MemoryFootprint FittedProfileCostSource::Memory(const model::MoeModelSpec& model,
                                                       double kv_tokens) const {
  model::MemoryFootprint footprint;
  footprint.weight_bytes_per_device = model::CountWeightBytes(model).total;
  footprint.kv_bytes_per_device =
      kv_tokens * static_cast<double>(model::KvCacheBytesPerToken(model, 32));  // fp32 KV
  footprint.capacity_bytes_per_device =
      fit_.machine.contains("memory_bytes") && fit_.machine["memory_bytes"].is_number()
          ? fit_.machine["memory_bytes"].get<double>()
          : std::numeric_limits<double>::infinity();
  return footprint;
}

nlohmann::json FittedProfileCostSource::Describe() const {
  nlohmann::json working_sets = nlohmann::json::array();
  for (const auto& [bytes, index] : working_set_curves_) working_sets.push_back(bytes);
  return {{"cost_source", name()},
          {"device", device_name_},
          {"profile", fit_.profile},
          {"profiled_device", device_},
          {"cache_working_sets_bytes", working_sets}};
}

}  // namespace moelab::fit
