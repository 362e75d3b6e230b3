#include "fit/profile_cost_source.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "fit/fit_json.h"
#include "fit/fit_options.h"
#include "fit/latency_fit.h"
#include "base/error.h"
#include "model/moe_math.h"
#include "model/parameter_count.h"
#include "model/sd_plan.h"

namespace moelab::fit {
namespace {

// Linear operator times a + b x, so the fitted curves reproduce them closely.
double ExpertFfn(double t) { return 1e-3 + 1e-5 * t; }
double Router(double t) { return 1e-5 + 1e-8 * t; }
double LmHead(double t) { return 5e-4 + 1e-6 * t; }
double DenseFfn(double t) { return 2e-4 + 1e-6 * t; }
double Attention(double b) { return 1e-4 + 2e-5 * b; }
double NormsResidual(double t) { return 2e-6 + 3e-7 * t; }

// Verify attention of `batch` sequences of q queries each: cheaper than q x batch decode
// sequences (the queries share their sequence's cache); at context 128 half the 1024 time.
double Verify(double queries, double batch) { return 1e-4 + 6e-6 * queries * batch; }

// `verify_queries`: the queries per sequence to plant attention_verify samples for (none: a fit
// of a profile made before attention_verify).
// `draft_shape`: when set, draft_decode samples of that shape (DraftPass at contexts 128 and 1024).
double DraftPass(double context, double batch) { return 2e-3 + 1e-6 * context + 3e-4 * batch; }

// expert_ffn_working_set's time over expert_ffn's: working sets of 1, 4 and 16 MB (16: the DRAM
// regime), at 1, 2, 4, 16 and 64 tokens. At 4 MB and 64 tokens the profile's noise put it 5 %
// above DRAM.
double CachedFactor(double working_set_bytes, double tokens) {
  if (working_set_bytes >= 16e6) return 1.0;
  const bool small = working_set_bytes < 2e6;
  if (tokens <= 4) return small ? 0.5 : 0.75;
  if (tokens <= 16) return small ? 0.8 : 0.9;
  return small ? 0.9 : 1.05;
}

// `norms`: norms_residual samples too (profiles from before it have none).
// `working_sets`: expert_ffn_working_set samples too (CachedFactor); `dram_point_factor` times
// the DRAM regime's 1-token sample (a disturbed measurement when above 1).
Profile SyntheticProfile(const std::vector<int64_t>& verify_queries = {},
                         const nlohmann::json& draft_shape = nullptr, bool norms = false,
                         bool working_sets = false, double dram_point_factor = 1.0) {
  Profile profile;
  profile.origin = "synthetic.json";
  auto add = [&](const char* op, nlohmann::json shape, double (*time)(double)) {
    for (int64_t t : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128}) {
      ProfileSample sample;
      sample.op = op;
      sample.device = "cpu";
      sample.shape = shape;
      sample.tokens = t;
      sample.median_s = time(static_cast<double>(t));
      profile.samples.push_back(sample);
    }
  };
  add("expert_ffn", {{"hidden", 64}}, ExpertFfn);
  add("router", {{"hidden", 64}}, Router);
  add("lm_head", {{"hidden", 64}}, LmHead);
  add("dense_ffn", {{"hidden", 32}}, DenseFfn);
  if (norms) add("norms_residual", {{"hidden", 64}}, NormsResidual);
  for (double bytes : {1e6, 4e6, 16e6}) {
    for (int64_t t : {1, 2, 4, 16, 64}) {
      if (!working_sets) break;
      ProfileSample sample;
      sample.op = "expert_ffn_working_set";
      sample.device = "cpu";
      sample.shape = {{"hidden", 64}, {"working_set_bytes", bytes}};
      sample.tokens = t;
      sample.median_s =
          ExpertFfn(static_cast<double>(t)) * CachedFactor(bytes, static_cast<double>(t));
      if (bytes >= 16e6 && t == 1) sample.median_s *= dram_point_factor;
      profile.samples.push_back(sample);
    }
  }
  add("attention_decode", {{"context", 1024}}, Attention);
  add("attention_decode", {{"context", 128}},
      [](double b) { return 10.0 * Attention(b); });  // never nearest
  for (int64_t q : verify_queries) {
    for (int64_t context : {128, 1024}) {
      for (int64_t b : {1, 2, 4, 8, 16}) {
        ProfileSample sample;
        sample.op = "attention_verify";
        sample.device = "cpu";
        sample.shape = {{"context", context}, {"queries_per_sequence", q}};
        sample.tokens = b;
        sample.median_s =
            (context == 128 ? 0.5 : 1.0) * Verify(static_cast<double>(q), static_cast<double>(b));
        profile.samples.push_back(sample);
      }
    }
  }
  if (!draft_shape.is_null()) {
    for (int64_t context : {128, 1024}) {
      for (int64_t b : {1, 2, 4, 8, 16}) {
        ProfileSample sample;
        sample.op = "draft_decode";
        sample.device = "cpu";
        sample.shape = draft_shape;
        sample.shape["context"] = context;
        sample.tokens = b;
        sample.median_s = DraftPass(static_cast<double>(context), static_cast<double>(b));
        profile.samples.push_back(sample);
      }
    }
  }
  return profile;
}

LatencyFit SyntheticFit(const std::vector<int64_t>& verify_queries = {},
                        const nlohmann::json& draft_shape = nullptr, bool norms = false,
                        bool working_sets = false, double dram_point_factor = 1.0) {
  FitOptions options;
  return FitLatency(
      SyntheticProfile(verify_queries, draft_shape, norms, working_sets, dram_point_factor),
      options);
}

model::MoeModelSpec Target() {
  model::MoeModelSpec spec;
  spec.name = "target";
  spec.num_layers = 4;
  spec.hidden_size = 64;
  spec.vocab_size = 100;
  spec.attention = {model::AttentionKind::kGroupedQuery, 4, 2, 16};
  spec.moe = model::MoeSpec{};
  spec.moe->num_experts = 8;
  spec.moe->top_k = 2;
  spec.moe->expert_intermediate_size = 128;
  return spec;
}

model::MoeModelSpec Draft() {
  model::MoeModelSpec spec;
  spec.name = "draft";
  spec.num_layers = 2;
  spec.hidden_size = 32;
  spec.vocab_size = 100;
  spec.attention = {model::AttentionKind::kGroupedQuery, 2, 1, 16};
  spec.dense_intermediate_size = 64;
  return spec;
}

// Decode attention at `context`: linear in the context between the profiled 128 (10x) and 1024.
double AttentionAt(double context, double rows) {
  const double at_128 = 10.0 * Attention(rows), at_1024 = Attention(rows);
  if (context <= 128) return at_128;
  return at_128 + (at_1024 - at_128) * (context - 128) / (1024 - 128);
}

TEST(FittedProfileCostSource, ComposesTheFittedCurvesPerLayer) {
  const model::MoeModelSpec target = Target(), draft = Draft();
  const FittedProfileCostSource source(SyntheticFit(), target);
  model::SdStepCosts costs(source, target, draft, 1000);
  for (int64_t batch : {1, 4}) {
    for (int64_t positions : {1, 5}) {
      const double n = static_cast<double>(batch * positions);
      const double activated = model::ExpectedActivatedExperts(n, 8, 2);
      const double expected =
          4 * (AttentionAt(1000, n) + Router(n) + activated * ExpertFfn(n * 2 / activated)) +
          LmHead(n);
      EXPECT_NEAR(costs.TargetStep(batch, positions), expected, 0.01 * expected)
          << batch << " x " << positions;
    }
    const double b = static_cast<double>(batch);
    // The draft's attention: the target's split into projection weights (bf16: 2 x (64 x (64 + 2 x
    // 32) + 64 x 64) bytes) and cached keys/values (b x 1001 positions x 2 x 32 wide x 4 bytes),
    // each scaled by the draft's own (32 x (32 + 2 x 16) + 32 x 32 weights; 16 wide).
    const double projection = 2.0 * (64 * (64 + 64) + 64 * 64), kv = b * 1001 * 2 * 32 * 4;
    const double scale = projection / (projection + kv) * (32.0 * (32 + 32) + 32 * 32) /
                             (64.0 * (64 + 64) + 64 * 64) +
                         kv / (projection + kv) * 0.5;
    const double draft_expected =
        2 * (DenseFfn(b) + scale * AttentionAt(1000, b)) + 0.5 * LmHead(b);  // hidden 32/64
    EXPECT_NEAR(costs.DraftStep(batch), draft_expected, 0.01 * draft_expected);
  }
  // A verify pass of more tokens activates more experts: target efficiency below 1.
  EXPECT_LT(costs.TargetStep(1, 1) / costs.TargetStep(1, 5), 1.0);
}

// With norms_residual profiled, every pass adds it once per layer over all its tokens (the
// executor's "other"); without it (older profiles) nothing changes.
TEST(FittedProfileCostSource, PricesNormsAndResidualAddsPerLayerWhenProfiled) {
  const model::MoeModelSpec target = Target();
  const FittedProfileCostSource with(SyntheticFit({}, nullptr, true), target);
  const FittedProfileCostSource without(SyntheticFit(), target);
  for (const model::ForwardShape& shape :
       {model::ForwardShape{3, 1, 500, true}, model::ForwardShape{2, 5, 300, true}}) {
    const double tokens = static_cast<double>(shape.batch * shape.tokens_per_sequence);
    const model::ForwardCost priced = with.Forward(target, shape);
    const model::ForwardCost plain = without.Forward(target, shape);
    const double norms = priced.OperatorTime(model::Operator::kNormsResidual);
    EXPECT_NEAR(norms, 4 * NormsResidual(tokens), 0.01 * norms) << tokens;
    EXPECT_EQ(plain.OperatorTime(model::Operator::kNormsResidual), 0.0);
    EXPECT_NEAR(priced.time_s, plain.time_s + norms, 1e-9 * priced.time_s);
  }
}

// With beam_selection profiled, a pass's ranked rows (a beam step) add its curve at their count;
// a pass without ranked rows, or a profile without the family, prices none.
TEST(FittedProfileCostSource, PricesABeamStepsRankingWhenProfiled) {
  const model::MoeModelSpec target = Target();
  Profile profile = SyntheticProfile();
  const FittedProfileCostSource without(FitLatency(profile, FitOptions{}), target);
  for (int64_t beams : {1, 2, 4, 8, 16}) {
    ProfileSample sample;
    sample.op = "beam_selection";
    sample.device = "cpu";
    sample.shape = {{"vocab", 100}};
    sample.tokens = beams;
    sample.median_s = 1e-5 + 2e-4 * static_cast<double>(beams);
    profile.samples.push_back(sample);
  }
  const FittedProfileCostSource with(FitLatency(profile, FitOptions{}), target);
  model::ForwardShape step{6, 1, 300, true};
  const double plain = with.Forward(target, step).time_s;
  EXPECT_EQ(with.Forward(target, step).OperatorTime(model::Operator::kBeamSelection), 0.0);
  step.ranked_rows = 6;
  const model::ForwardCost beam = with.Forward(target, step);
  const double ranking = beam.OperatorTime(model::Operator::kBeamSelection);
  EXPECT_NEAR(ranking, 1e-5 + 2e-4 * 6, 0.02 * ranking);  // held out between 4 and 8
  EXPECT_NEAR(beam.time_s, plain + ranking, 1e-9 * beam.time_s);
  EXPECT_EQ(without.Forward(target, step).time_s, plain);
}

TEST(FittedProfileCostSource, CacheRatioIsTheWorkingSetCurveOverTheDramOne) {
  const model::MoeModelSpec target = Target();
  const FittedProfileCostSource source(SyntheticFit({}, nullptr, false, true), target);
  EXPECT_NEAR(source.CacheRatio(1, 1e6), 0.5, 1e-9);
  EXPECT_NEAR(source.CacheRatio(4, 1e6), 0.5, 1e-9);
  EXPECT_NEAR(source.CacheRatio(16, 4e6), 0.9, 1e-9);
  EXPECT_NEAR(source.CacheRatio(1, 0.2e6), 0.5, 1e-9);    // below the smallest: its ratio
  EXPECT_NEAR(source.CacheRatio(1, 2.5e6), 0.625, 1e-9);  // linear in the working set
  EXPECT_NEAR(source.CacheRatio(1, 10e6), 0.875, 1e-9);   // 0.75 .. 1 between 4 and 16 MB
  EXPECT_EQ(source.CacheRatio(1, 16e6), 1.0);             // the DRAM regime and beyond
  EXPECT_EQ(source.CacheRatio(1, 1e9), 1.0);
  // Beyond every cache (the simulator's passes after a storage read): DRAM at every row count.
  for (int64_t rows : {1, 4, 64, 500})
    EXPECT_EQ(source.CacheRatio(rows, std::numeric_limits<double>::infinity()), 1.0) << rows;
  EXPECT_EQ(source.CacheRatio(64, 4e6), 1.0);  // 1.05 is noise: never above 1
  // Above 64 tokens: what the cache saved at 64 (a tenth of its time), over the longer call.
  EXPECT_NEAR(source.CacheRatio(500, 1e6), 1 - 0.1 * ExpertFfn(64) / ExpertFfn(500), 1e-6);
  // A fit without the curves prices every working set from DRAM.
  const FittedProfileCostSource plain(SyntheticFit(), target);
  EXPECT_EQ(plain.CacheRatio(1, 1e6), 1.0);
  EXPECT_TRUE(source.Describe()["cache_working_sets_bytes"].size() == 3);
  EXPECT_TRUE(plain.Describe()["cache_working_sets_bytes"].empty());
  // Curves of another expert than expert_ffn's are refused, naming the file.
  LatencyFit other = SyntheticFit({}, nullptr, false, true);
  for (OperatorCurve& curve : other.operators) {
    if (curve.op == "expert_ffn_working_set") curve.shape["hidden"] = 128;
  }
  try {
    FittedProfileCostSource refused(other, target);
    ADD_FAILURE() << "a working-set curve of another expert was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("synthetic.json"), std::string::npos) << e.what();
  }
}

// The call from DRAM is measured twice (the family's DRAM regime, expert_ffn): a disturbed DRAM
// point, four times expert_ffn's, does not make the cache look four times faster; a faster one is
// the better measurement and is used.
TEST(FittedProfileCostSource, CacheRatioTakesTheFasterOfTheTwoDramMeasurements) {
  const model::MoeModelSpec target = Target();
  const FittedProfileCostSource disturbed(SyntheticFit({}, nullptr, false, true, 4.0), target);
  EXPECT_NEAR(disturbed.CacheRatio(1, 1e6), 0.5, 1e-9);
  EXPECT_NEAR(disturbed.CacheRatio(2, 1e6), 0.5, 1e-9);  // the other points as they were
  const FittedProfileCostSource faster(SyntheticFit({}, nullptr, false, true, 0.8), target);
  EXPECT_NEAR(faster.CacheRatio(1, 1e6), 0.5 / 0.8, 1e-9);
  EXPECT_EQ(faster.CacheRatio(1, 16e6), 1.0);
}

// Every weight-reading operator takes the ratio at its rows; norms and residual adds do not.
TEST(FittedProfileCostSource, APassInACachedWorkingSetStreamsItsWeightsFaster) {
  const model::MoeModelSpec target = Target();
  const FittedProfileCostSource source(SyntheticFit({}, nullptr, true, true), target);
  const FittedProfileCostSource plain(SyntheticFit({}, nullptr, true), target);
  model::ForwardShape decode{1, 1, 500, true};
  decode.working_set_bytes = 1e6;
  const model::ForwardCost cached = source.Forward(target, decode);
  const model::ForwardCost dram = plain.Forward(target, decode);
  for (model::Operator op : {model::Operator::kAttention, model::Operator::kRouter,
                             model::Operator::kRoutedExperts, model::Operator::kLmHead}) {
    EXPECT_NEAR(cached.OperatorTime(op), 0.5 * dram.OperatorTime(op), 1e-9 * dram.time_s)
        << model::OperatorName(op);
  }
  EXPECT_NEAR(cached.OperatorTime(model::Operator::kNormsResidual),
              dram.OperatorTime(model::Operator::kNormsResidual), 1e-12);
  // The DRAM regime's working set prices what the plain fit does.
  decode.working_set_bytes = 64e6;
  EXPECT_NEAR(source.Forward(target, decode).time_s, dram.time_s, 1e-9 * dram.time_s);
  // Unset, the working set is the whole model with the pass's fp32 KV cache.
  decode.working_set_bytes = 0;
  const double whole = FittedProfileCostSource::WorkingSetOf(target, decode);
  EXPECT_DOUBLE_EQ(whole, model::PassWorkingSetBytes(
                              target, 4 * 8, 501.0 * model::KvCacheBytesPerToken(target, 32)));
  model::ForwardShape named = decode;
  named.working_set_bytes = whole;
  EXPECT_DOUBLE_EQ(source.Forward(target, decode).time_s, source.Forward(target, named).time_s);
  // 64 sequences: 64-row matmuls, the ratio at 64 tokens (0.9).
  model::ForwardShape wide{64, 1, 500, true};
  wide.working_set_bytes = 1e6;
  EXPECT_NEAR(source.Forward(target, wide).OperatorTime(model::Operator::kLmHead),
              0.9 * plain.Forward(target, wide).OperatorTime(model::Operator::kLmHead), 1e-9);
  // One expert: the same ratio, in the working set the caller names.
  EXPECT_NEAR(source.ExpertSeconds(target, 1, 1e6), 0.5 * ExpertFfn(1), 1e-3 * ExpertFfn(1));
  EXPECT_NEAR(source.ExpertSeconds(target, 1, 1e9), ExpertFfn(1), 1e-3 * ExpertFfn(1));
  EXPECT_THROW(source.ExpertSeconds(target, 1, -1), base::Error);
}

TEST(FittedProfileCostSource, DecodeAttentionIsLinearInContextBetweenProfiledContexts) {
  const model::MoeModelSpec target = Target();
  const FittedProfileCostSource source(SyntheticFit(), target);
  const auto attention = [&](int64_t context) {
    return source.Forward(target, {1, 1, context, true}).OperatorTime(model::Operator::kAttention) /
           4.0;
  };
  EXPECT_NEAR(attention(1024), Attention(1), 1e-3 * Attention(1));
  EXPECT_NEAR(attention(576), 0.5 * (Attention(1) + 10 * Attention(1)), 1e-3 * Attention(1));
  EXPECT_NEAR(attention(64), 10 * Attention(1),
              1e-2 * Attention(1));            // below the grid: the smallest's curve
  EXPECT_THROW(attention(4000), base::Error);  // extrapolating the falling line past zero: refused
}

TEST(FittedProfileCostSource, RefusesFitsWithoutTheNeededCurvesAndDenseTargets) {
  const model::MoeModelSpec target = Target(), draft = Draft();
  LatencyFit fit = SyntheticFit();
  LatencyFit no_router = fit;
  std::erase_if(no_router.operators, [](const OperatorCurve& c) { return c.op == "router"; });
  try {
    FittedProfileCostSource source(no_router, target);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no 'router' curve"), std::string::npos) << e.what();
  }
  EXPECT_THROW(FittedProfileCostSource(fit, draft), base::Error);
  model::MoeModelSpec other_vocab = draft;
  other_vocab.vocab_size = 50;
  const FittedProfileCostSource source(fit, target);
  EXPECT_THROW(source.Forward(other_vocab, {1, 1, 1000, true}), base::Error);
}

// The curves price the weight formats the profile measured: a model at other bits per weight
// (experts or attention) is refused, the same bits are priced.
TEST(FittedProfileCostSource, RefusesAModelAtOtherBitsThanProfiled) {
  model::MoeModelSpec quantized = Target();
  quantized.bits.experts = 4.5;
  const FittedProfileCostSource source(SyntheticFit(), quantized);
  EXPECT_GT(source.Forward(quantized, {1, 1, 100, false}).time_s, 0.0);
  const model::MoeModelSpec bf16 = Target();
  try {
    source.Forward(bf16, {1, 1, 100, false});
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("measured expert weights at 4.5 bits"), std::string::npos)
        << e.what();
  }
  model::MoeModelSpec attention = quantized;
  attention.bits.attention = 8.5;
  EXPECT_THROW(source.Forward(attention, {1, 1, 100, false}), base::Error);
}

TEST(FittedProfileCostSource, VerifyPassesUseTheVerifyCurvesWhenTheFitHasThem) {
  const model::MoeModelSpec target = Target();
  // Through the fit file, as `moelab fit latency` writes it and the cost sources read it.
  const LatencyFit fit =
      LatencyFitFromJson(LatencyFitToJson(SyntheticFit({3, 5})), "synthetic-fit.json");
  const FittedProfileCostSource source(fit, target);
  const FittedProfileCostSource old(SyntheticFit(), target);
  const auto attention = [](const FittedProfileCostSource& s, int64_t batch, int64_t queries,
                            int64_t context) {
    return s.Forward(Target(), {batch, queries, context, true})
               .OperatorTime(model::Operator::kAttention) /
           4.0;
  };
  for (int64_t batch : {1, 3, 4}) {
    const double b = static_cast<double>(batch);
    // At a profiled q and context; q = 4 between the profiled 3 and 5; q = 9 continues the 3..5
    // line; context 576 halfway between 128 and 1024.
    EXPECT_NEAR(attention(source, batch, 5, 1024), Verify(5, b), 1e-3 * Verify(5, b)) << batch;
    EXPECT_NEAR(attention(source, batch, 4, 1024), Verify(4, b), 1e-3 * Verify(4, b)) << batch;
    EXPECT_NEAR(attention(source, batch, 9, 1024), Verify(9, b), 1e-3 * Verify(9, b)) << batch;
    EXPECT_NEAR(attention(source, batch, 3, 576), 0.75 * Verify(3, b), 1e-3 * Verify(3, b));
    // Below the smallest profiled q: between decode at x = batch (q = 1) and q = 3.
    const double q2 = 0.5 * (Attention(b) + Verify(3, b));
    EXPECT_NEAR(attention(source, batch, 2, 1024), q2, 1e-3 * q2) << batch;
    // Without verify curves: q x batch decode rows, as before attention_verify existed.
    EXPECT_NEAR(attention(old, batch, 5, 1024), Attention(5 * b), 1e-3 * Attention(5 * b));
    EXPECT_LT(attention(source, batch, 5, 1024), attention(old, batch, 5, 1024));
    // Decode passes are priced as before; a prefill (empty cache) never takes the verify curves
    // (this fit has no attention_prefill curve to price it).
    EXPECT_DOUBLE_EQ(attention(source, batch, 1, 1000), attention(old, batch, 1, 1000));
    EXPECT_THROW(attention(source, batch, 5, 0), base::Error);
  }
  // The SD step it feeds: the target's verify step is cheaper, its draft step unchanged.
  model::SdStepCosts with(source, target, Draft(), 1000), without(old, target, Draft(), 1000);
  EXPECT_LT(with.TargetStep(4, 5), without.TargetStep(4, 5));
  EXPECT_DOUBLE_EQ(with.TargetStep(4, 1), without.TargetStep(4, 1));
  EXPECT_DOUBLE_EQ(with.DraftStep(4), without.DraftStep(4));
}

// Causal attention over a prompt of t tokens: projections plus t (t + 1) / 2 query-key pairs.
double PrefillAttention(double t) { return 2e-5 + 3e-6 * t + 4e-9 * t * (t + 1) / 2; }

TEST(FittedProfileCostSource, APrefillChunkIsPricedAsTheLastRowsOfALongerPrefill) {
  Profile profile = SyntheticProfile({3, 5});
  for (int64_t t : {16, 32, 64, 128, 256, 512, 1024}) {
    ProfileSample sample;
    sample.op = "attention_prefill";
    sample.device = "cpu";
    sample.shape = {{"hidden", 64}};
    sample.tokens = t;
    sample.median_s = PrefillAttention(static_cast<double>(t));
    profile.samples.push_back(sample);
  }
  // A noisy profile: q = 5 measured below q = 3 at context 1024, so the verify curves' last
  // segment falls and, extended to a 60-token chunk, crosses zero.
  for (ProfileSample& sample : profile.samples) {
    if (sample.op == "attention_verify" && sample.shape["queries_per_sequence"] == 5 &&
        sample.shape["context"] == 1024)
      sample.median_s = 0.6 * Verify(3, static_cast<double>(sample.tokens));
  }
  const FittedProfileCostSource source(FitLatency(profile, FitOptions{}), Target());
  const auto attention = [&](int64_t batch, int64_t tokens, int64_t context, bool all_logits) {
    return source.Forward(Target(), {batch, tokens, context, all_logits})
               .OperatorTime(model::Operator::kAttention) /
           4.0;
  };
  for (int64_t batch : {1, 2}) {
    const double b = static_cast<double>(batch);
    // A chunk of 60 after 1000 prompt tokens: prefill(1060) - prefill(1000), per sequence.
    const double chunk = b * (PrefillAttention(1060) - PrefillAttention(1000));
    EXPECT_NEAR(attention(batch, 60, 1000, false), chunk, 1e-2 * chunk) << batch;
    // Its first chunk (empty cache) is the prefill itself; a longer context costs more.
    EXPECT_NEAR(attention(batch, 60, 0, false), b * PrefillAttention(60),
                1e-2 * b * PrefillAttention(60));
    EXPECT_GT(attention(batch, 60, 1000, false), attention(batch, 60, 100, false));
    // A verify pass of the same shape (logits at every position) still takes the verify curves,
    // here the noisy ones: that is the error a prefill chunk no longer meets.
    EXPECT_THROW(attention(batch, 60, 1000, true), base::Error);
  }
}

TEST(FittedProfileCostSource, TheDraftsMeasuredPassPricesItsOneTokenSteps) {
  const model::MoeModelSpec target = Target(), draft = Draft();
  const nlohmann::json shape = {{"model", "draft"},   {"layers", 2}, {"hidden", 32},
                                {"intermediate", 64}, {"heads", 2},  {"kv_heads", 1},
                                {"head_dim", 16},     {"vocab", 100}};
  const FittedProfileCostSource measured(SyntheticFit({}, shape), target);
  const FittedProfileCostSource composed(SyntheticFit(), target);
  for (int64_t batch : {1, 3, 8}) {
    for (int64_t context : {128, 500, 1024}) {
      const model::ForwardShape pass{batch, 1, context, true};
      const double expected = DraftPass(static_cast<double>(context), static_cast<double>(batch));
      const model::ForwardCost cost = measured.Forward(draft, pass);
      EXPECT_NEAR(cost.time_s, expected, 0.01 * expected) << batch << " at " << context;
      // The breakdown keeps the composed estimate's proportions.
      const model::ForwardCost parts = composed.Forward(draft, pass);
      for (model::Operator op :
           {model::Operator::kAttention, model::Operator::kDenseFfn, model::Operator::kLmHead}) {
        EXPECT_NEAR(cost.OperatorTime(op) / cost.time_s, parts.OperatorTime(op) / parts.time_s,
                    1e-9);
      }
    }
  }
  // Two tokens per sequence (the catch-up pass, not what draft_decode measured): the composition
  // times the one-token pass's measured / composed ratio.
  const model::ForwardShape two{2, 2, 500, false}, one_token{2, 1, 500, true};
  EXPECT_NEAR(measured.Forward(draft, two).time_s,
              composed.Forward(draft, two).time_s * DraftPass(500, 2) /
                  composed.Forward(draft, one_token).time_s,
              1e-3 * DraftPass(500, 2));
  EXPECT_GT(measured.Forward(draft, two).time_s, measured.Forward(draft, one_token).time_s);
  // Another draft shape and the target are priced as without the draft's samples.
  model::MoeModelSpec other = draft;
  other.num_layers = 3;
  const model::ForwardShape one{2, 1, 500, true};
  EXPECT_DOUBLE_EQ(measured.Forward(other, one).time_s, composed.Forward(other, one).time_s);
  EXPECT_DOUBLE_EQ(measured.Forward(target, one).time_s, composed.Forward(target, one).time_s);
}

// An SD round's second and later draft passes (ForwardShape::after_own_pass) take the
// draft_decode_warm curves; a profile without them prices them as the first pass.
TEST(FittedProfileCostSource, ADraftPassAfterItsOwnTakesTheWarmCurves) {
  const model::MoeModelSpec target = Target(), draft = Draft();
  const nlohmann::json shape = {{"model", "draft"},   {"layers", 2}, {"hidden", 32},
                                {"intermediate", 64}, {"heads", 2},  {"kv_heads", 1},
                                {"head_dim", 16},     {"vocab", 100}};
  Profile profile = SyntheticProfile({}, shape);
  const FittedProfileCostSource cold_only(FitLatency(profile, FitOptions{}), target);
  const size_t samples = profile.samples.size();
  for (size_t i = 0; i < samples; ++i) {
    if (profile.samples[i].op != "draft_decode") continue;
    ProfileSample warm = profile.samples[i];
    warm.op = "draft_decode_warm";
    warm.median_s *= 0.8;
    profile.samples.push_back(warm);
  }
  const FittedProfileCostSource both(FitLatency(profile, FitOptions{}), target);
  for (int64_t batch : {1, 3, 8}) {
    for (int64_t context : {128, 500, 1024}) {
      const double first = DraftPass(static_cast<double>(context), static_cast<double>(batch));
      model::ForwardShape pass{batch, 1, context, true};
      EXPECT_NEAR(both.Forward(draft, pass).time_s, first, 0.01 * first);
      pass.after_own_pass = true;
      EXPECT_NEAR(both.Forward(draft, pass).time_s, 0.8 * first, 0.01 * first)
          << batch << " at " << context;
      EXPECT_DOUBLE_EQ(cold_only.Forward(draft, pass).time_s,
                       cold_only.Forward(draft, {batch, 1, context, true}).time_s);
    }
  }
  // A round of gamma passes: the first, then gamma - 1 warm ones; the plan's rows say both.
  model::SdStepCosts costs(both, target, draft, 500);
  EXPECT_NEAR(costs.DraftPasses(2, 4), costs.DraftStep(2) + 3 * costs.DraftFollowingStep(2), 1e-15);
  EXPECT_NEAR(costs.DraftFollowingStep(2), 0.8 * costs.DraftStep(2), 0.01 * costs.DraftStep(2));
  model::SdPlanOptions options;
  options.alpha = 0.8;
  options.batches = {2};
  options.gammas = {1, 4};
  for (const model::SdPlanRow& row : model::PlanSpeculativeDecoding(costs, options).rows) {
    EXPECT_DOUBLE_EQ(row.draft_following_step_s, costs.DraftFollowingStep(2));
    const double round =
        costs.DraftPasses(2, row.gamma) + row.catch_up_s + row.verify_s + row.reject_s;
    EXPECT_NEAR(row.speedup, row.sigma * (row.gamma + 1) * row.target_step_s / round, 1e-12);
  }
}

}  // namespace
}  // namespace moelab::fit
