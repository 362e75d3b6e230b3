#include "executor/generation.h"

#include <algorithm>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "executor/beam_selection.h"
#include "kernels/elementwise.h"
#include "base/error.h"
#include "model/moe_math.h"
#include "routing/routing_trace.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::executor {
namespace {

// A beam step's ranking keeps the same candidates, in the same order, as ranking all alive x vocab
// of them: logits on a coarse grid, so scores tie across beams and within one.
TEST(RankBeamCandidates, KeepsWhatRankingEveryCandidateKeeps) {
  const int64_t vocab = 40;
  for (const int64_t alive : {1, 2, 3, 5}) {
    for (const int64_t kept : {1, 2, 4, 7}) {
      std::vector<float> logits(static_cast<size_t>(alive * vocab));
      for (size_t i = 0; i < logits.size(); ++i)
        logits[i] = 0.5f * static_cast<float>((i * 7919 + static_cast<size_t>(kept)) % 9);
      std::vector<double> beams;
      for (int64_t b = 0; b < alive; ++b) beams.push_back(b % 2 == 0 ? -1.0 : -1.5);
      std::vector<BeamCandidate> all;
      for (int64_t b = 0; b < alive; ++b) {
        const float* row = logits.data() + b * vocab;
        const float log_sum = kernels::LogSumExp(row, vocab);
        for (int64_t t = 0; t < vocab; ++t) {
          all.push_back({beams[static_cast<size_t>(b)] + (row[t] - log_sum), b,
                         static_cast<int32_t>(t), row[t] - log_sum});
        }
      }
      std::sort(all.begin(), all.end(), BetterBeamCandidate);
      std::vector<BeamCandidate> ranked = {{0.0, 9, 9, 0.0f}};  // cleared first
      RankBeamCandidates(logits.data(), alive, vocab, beams, kept, ranked);
      ASSERT_EQ(ranked.size(), static_cast<size_t>(kept));
      for (int64_t i = 0; i < kept; ++i) {
        EXPECT_EQ(ranked[i].parent, all[i].parent) << alive << " beams, keep " << kept << ": " << i;
        EXPECT_EQ(ranked[i].token, all[i].token) << alive << " beams, keep " << kept << ": " << i;
        EXPECT_EQ(ranked[i].score, all[i].score) << alive << " beams, keep " << kept << ": " << i;
      }
    }
  }
  std::vector<BeamCandidate> ranked;
  const std::vector<float> two(2, 0.0f);
  EXPECT_NE(testing::ErrorOf([&] {
              RankBeamCandidates(two.data(), 1, 2, {0.0}, 3, ranked);
            }).find("cannot keep 3"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              RankBeamCandidates(two.data(), 2, 1, {0.0}, 1, ranked);
            }).find("2 beams (1 log-probabilities)"),
            std::string::npos);
}

struct Models {
  explicit Models(int64_t vocab = 37, uint64_t seed = 21)
      : pool(2),
        target_weights(MakeSyntheticWeights(testing::TinyMixtral(vocab), seed, pool)),
        draft_weights(MakeSyntheticWeights(testing::TinyLlama(vocab), seed + 1, pool)),
        target(target_weights, pool),
        draft(draft_weights, pool) {}
  kernels::ThreadPool pool;
  ModelWeights target_weights, draft_weights;
  Transformer target, draft;
};

SpeculativeOptions FixedAlpha(int64_t gamma, double alpha, int64_t output_tokens,
                              Acceptance acceptance = Acceptance::kCoinAlpha) {
  SpeculativeOptions options;
  options.gamma = gamma;
  options.acceptance = acceptance;
  options.alpha = alpha;
  options.output_tokens = output_tokens;
  return options;
}

TEST(Speculative, GreedyEmitsExactlyTheTargetsGreedyTokens) {
  Models m;
  for (int64_t batch : {1, 3}) {
    const auto prompts = SyntheticPrompts(batch, 5, 37, 4);
    DecodeOptions plain;
    plain.output_tokens = 24;
    const DecodeResult reference = RunDecode(m.target, prompts, plain);
    for (int64_t gamma : {1, 2, 3, 5}) {
      SpeculativeOptions options;
      options.gamma = gamma;
      options.output_tokens = 24;
      const SpeculativeResult sd = RunSpeculative(m.target, m.draft, prompts, options);
      EXPECT_EQ(sd.outputs, reference.outputs) << "batch " << batch << " gamma " << gamma;
      EXPECT_GT(sd.rounds, 0);
    }
  }
}

TEST(Speculative, DraftEqualToTargetAcceptsEverything) {
  Models m;
  const auto prompts = SyntheticPrompts(2, 4, 37, 9);
  SpeculativeOptions options;
  options.gamma = 4;
  options.output_tokens = 21;
  const SpeculativeResult sd = RunSpeculative(m.target, m.target, prompts, options);
  for (int64_t accepted : sd.accepted_per_round) EXPECT_EQ(accepted, 4);
  EXPECT_DOUBLE_EQ(sd.Sigma(4), 1.0);
  EXPECT_EQ(sd.rounds, 4);  // 1 token from the prefill + 4 rounds of 5
}

// Rejection sampling must leave the output distributed as the target's own samples. With a
// vocabulary of 8, the exact distribution of the second output token is
//   P(t1) = sum_t0 p(t0 | prompt) p(t1 | prompt, t0),
// computed from the target directly; 6000 SD runs with different seeds are compared with it by a
// chi-square test (7 degrees of freedom; 24.3 is the 0.001 critical value).
TEST(Speculative, RejectionSamplingPreservesTheTargetDistribution) {
  Models m(8, 5);
  const std::vector<TokenIds> prompt = {{1, 5, 2}};
  std::vector<double> exact(8, 0.0);
  {
    KvCache cache(m.target.config(), 16);
    std::vector<SequenceInput> batch = {{&cache, prompt[0]}};
    std::vector<float> logits;
    m.target.Forward(batch, {LogitRows::kLastPerSequence, nullptr, nullptr, "test"}, logits);
    std::vector<float> p0 = logits;
    kernels::Softmax(p0.data(), 8);
    for (int32_t t0 = 0; t0 < 8; ++t0) {
      KvCache branch(m.target.config(), 16);
      branch.CopyFrom(cache);
      std::vector<SequenceInput> next = {{&branch, {t0}}};
      m.target.Forward(next, {LogitRows::kLastPerSequence, nullptr, nullptr, "test"}, logits);
      kernels::Softmax(logits.data(), 8);
      for (int t1 = 0; t1 < 8; ++t1) exact[t1] += p0[t0] * logits[t1];
    }
  }
  const int trials = 6000;
  std::vector<double> counts(8, 0.0), draft_only(8, 0.0);
  SpeculativeOptions options;
  options.gamma = 2;
  options.acceptance = Acceptance::kRejectionSampling;
  options.output_tokens = 2;
  int64_t rejections = 0;
  for (int trial = 0; trial < trials; ++trial) {
    options.seed = 1000 + trial;
    const SpeculativeResult sd = RunSpeculative(m.target, m.draft, prompt, options);
    counts[sd.outputs[0][1]] += 1;
    for (int64_t a : sd.accepted_per_round) rejections += a < 2;
  }
  double chi_square = 0;
  for (int t = 0; t < 8; ++t) {
    const double expected = exact[t] * trials;
    chi_square += (counts[t] - expected) * (counts[t] - expected) / expected;
  }
  EXPECT_LT(chi_square, 24.3);
  // The test has teeth only if drafts were rejected often enough to matter.
  EXPECT_GT(rejections, trials / 10);
}

// Drafted tokens accepted in a round of gamma drafts each accepted with probability alpha until
// the first rejection: P(k) = alpha^k (1 - alpha) for k < gamma, alpha^gamma for k = gamma.
struct AcceptedPerRound {
  double mean = 0, variance = 0;
};
AcceptedPerRound TruncatedGeometric(double alpha, int64_t gamma) {
  double mean = 0, square = 0;
  for (int64_t k = 0; k <= gamma; ++k) {
    const double p = std::pow(alpha, static_cast<double>(k)) * (k < gamma ? 1 - alpha : 1.0);
    mean += static_cast<double>(k) * p;
    square += static_cast<double>(k * k) * p;
  }
  return {mean, square - mean * mean};
}

// Both fixed-rate modes: the mean accepted drafts per sequence-round converge to the truncated
// geometric's mean, within 4 standard errors of it (its exact variance over the rounds run; the
// coins are seeded, so the run is the same every time), and sigma is that mean's (A + 1) /
// (gamma + 1). alpha = 1 is refused.
TEST(Speculative, FixedAlphaAcceptanceMatchesSigma) {
  Models m;
  const auto prompts = SyntheticPrompts(8, 3, 37, 2);
  for (const Acceptance acceptance : {Acceptance::kTargetAlpha, Acceptance::kCoinAlpha}) {
    for (const auto& [alpha, gamma] :
         {std::pair{0.6, int64_t{4}}, std::pair{0.3, int64_t{2}}, std::pair{0.9, int64_t{3}}}) {
      const SpeculativeResult sd =
          RunSpeculative(m.target, m.draft, prompts, FixedAlpha(gamma, alpha, 100, acceptance));
      const AcceptedPerRound expected = TruncatedGeometric(alpha, gamma);
      const double rounds = static_cast<double>(sd.accepted_per_round.size());
      double accepted = 0;
      for (const int64_t a : sd.accepted_per_round) accepted += static_cast<double>(a);
      const double mean = accepted / rounds;
      const double standard_error = std::sqrt(expected.variance / rounds);
      EXPECT_NEAR(mean, expected.mean, 4 * standard_error)
          << ToString(acceptance) << " alpha " << alpha << " gamma " << gamma << " over " << rounds
          << " sequence-rounds";
      EXPECT_NEAR(sd.Sigma(gamma), (mean + 1) / static_cast<double>(gamma + 1), 1e-12);
      EXPECT_NEAR(expected.mean / static_cast<double>(gamma + 1),
                  model::AcceptedLengthFraction(alpha, gamma) - 1 / static_cast<double>(gamma + 1),
                  1e-12);
    }
  }
  EXPECT_THROW(RunSpeculative(m.target, m.draft, prompts,
                              [] {
                                SpeculativeOptions bad;
                                bad.alpha = 1.0;
                                return bad;
                              }()),
               base::Error);
}

// --acceptance alpha: the drafts are the target's continuation at rate alpha, so the output is
// the target's greedy decode whatever alpha is, and the rounds still reject at rate 1 - alpha.
TEST(Speculative, TargetAlphaEmitsTheTargetsGreedyDecode) {
  Models m;
  for (const int64_t batch : {1, 3}) {
    const auto prompts = SyntheticPrompts(batch, 5, 37, 8);
    DecodeOptions plain;
    plain.output_tokens = 30;
    const DecodeResult reference = RunDecode(m.target, prompts, plain);
    for (const double alpha : {0.0, 0.5, 0.9}) {
      const SpeculativeResult sd = RunSpeculative(
          m.target, m.draft, prompts, FixedAlpha(3, alpha, 30, Acceptance::kTargetAlpha));
      EXPECT_EQ(sd.outputs, reference.outputs) << "batch " << batch << " alpha " << alpha;
      int64_t accepted = 0;
      for (const int64_t a : sd.accepted_per_round) accepted += a;
      // Braced: gtest's EXPECT_* expand to an if/else (-Wdangling-else).
      if (alpha == 0.0) {
        EXPECT_EQ(accepted, 0);
      }
      if (alpha == 0.9) {
        EXPECT_GT(accepted, static_cast<int64_t>(sd.accepted_per_round.size()));
      }
    }
  }
}

// A caller's continuation (the same greedy decode, decoded once) gives the same run as
// RunSpeculative decoding it itself; one too short for the last round's drafts is refused.
TEST(Speculative, TargetAlphaTakesAGivenContinuation) {
  Models m;
  const auto prompts = SyntheticPrompts(2, 4, 37, 5);
  const SpeculativeOptions own = FixedAlpha(3, 0.7, 20, Acceptance::kTargetAlpha);
  const SpeculativeResult decoded = RunSpeculative(m.target, m.draft, prompts, own);
  DecodeOptions plain;
  plain.output_tokens = 20 + 3;
  const std::vector<TokenIds> continuation = RunDecode(m.target, prompts, plain).outputs;
  SpeculativeOptions given = own;
  given.continuation = &continuation;
  const SpeculativeResult reused = RunSpeculative(m.target, m.draft, prompts, given);
  EXPECT_EQ(reused.outputs, decoded.outputs);
  EXPECT_EQ(reused.accepted_per_round, decoded.accepted_per_round);
  plain.output_tokens = 20 + 2;
  const std::vector<TokenIds> short_one = RunDecode(m.target, prompts, plain).outputs;
  given.continuation = &short_one;
  EXPECT_NE(testing::ErrorOf([&] {
              RunSpeculative(m.target, m.draft, prompts, given);
            }).find("at least 23 tokens"),
            std::string::npos);
}

// Distinct experts per MoE layer: the samples' mean and its standard error (their standard
// deviation over the square root of their count).
struct DistinctExperts {
  std::vector<double> samples;
  double Mean() const {
    double sum = 0;
    for (const double x : samples) sum += x;
    return sum / static_cast<double>(samples.size());
  }
  double StandardError() const {
    const double mean = Mean();
    double squares = 0;
    for (const double x : samples) squares += (x - mean) * (x - mean);
    const double n = static_cast<double>(samples.size());
    return std::sqrt(squares / (n - 1) / n);
  }
};

// Each pass of `kind`, each MoE layer: its distinct experts.
DistinctExperts DistinctPerPass(const routing::RoutingTrace& trace, const std::string& kind) {
  DistinctExperts distinct_experts;
  for (const routing::RoutingStep& step : trace.steps) {
    if (step.kind != kind) continue;
    for (const auto& layer : step.experts) {
      std::set<int32_t> distinct;
      for (const auto& token : layer) distinct.insert(token.begin(), token.end());
      distinct_experts.samples.push_back(static_cast<double>(distinct.size()));
    }
  }
  return distinct_experts;
}

// The same over windows of `width` consecutive decode steps of a batch-1 decode, the windows
// starting every `stride` steps (stride = width: disjoint windows, independent samples).
DistinctExperts DistinctPerDecodeWindow(const routing::RoutingTrace& trace, size_t width,
                                        size_t stride) {
  std::vector<const routing::RoutingStep*> decode;
  for (const routing::RoutingStep& step : trace.steps) {
    if (step.kind == "decode") decode.push_back(&step);
  }
  DistinctExperts distinct_experts;
  for (size_t first = 0; first + width <= decode.size(); first += stride) {
    for (size_t layer = 0; layer < decode[first]->experts.size(); ++layer) {
      std::set<int32_t> distinct;
      for (size_t s = first; s < first + width; ++s) {
        for (const auto& token : decode[s]->experts[layer])
          distinct.insert(token.begin(), token.end());
      }
      distinct_experts.samples.push_back(static_cast<double>(distinct.size()));
    }
  }
  return distinct_experts;
}

// Issue 42: a verify pass of --acceptance alpha carries the target's continuation, so its distinct
// experts per layer are those of as many consecutive decode tokens of the same sequence;
// --acceptance alpha-coin's synthetic drafts repeat a few tokens and route to far fewer. The
// statistic: the difference of the two means against 3 standard errors of it (the verify passes'
// (pass, layer) samples and the decode's disjoint windows', independent of each other); the
// decode's mean is over every window.
TEST(Speculative, TargetAlphaVerifyRoutesLikeConsecutiveDecodeTokens) {
  executor::ExecutorConfig config = testing::TinyMixtral(64);
  config.num_experts = 16;
  kernels::ThreadPool pool(2);
  const ModelWeights target_weights = MakeSyntheticWeights(config, 31, pool);
  const ModelWeights draft_weights = MakeSyntheticWeights(testing::TinyLlama(64), 32, pool);
  Transformer target(target_weights, pool), draft(draft_weights, pool);
  const int64_t gamma = 4, tokens = 100;
  const auto prompts = SyntheticPrompts(1, 6, 64, 3);
  routing::RoutingTrace decode_trace;
  DecodeOptions plain;
  plain.output_tokens = tokens;
  plain.record = &decode_trace;
  RunDecode(target, prompts, plain);
  const double decode_window = DistinctPerDecodeWindow(decode_trace, gamma + 1, 1).Mean();
  const double decode_error =
      DistinctPerDecodeWindow(decode_trace, gamma + 1, gamma + 1).StandardError();
  DistinctExperts verify[2];
  for (const Acceptance acceptance : {Acceptance::kTargetAlpha, Acceptance::kCoinAlpha}) {
    routing::RoutingTrace trace;
    SpeculativeOptions options = FixedAlpha(gamma, 0.8, tokens, acceptance);
    options.record = &trace;
    RunSpeculative(target, draft, prompts, options);
    verify[acceptance == Acceptance::kCoinAlpha] = DistinctPerPass(trace, "verify");
  }
  for (const DistinctExperts& v : verify) ASSERT_GE(v.samples.size(), 20u);
  const double alpha_error = std::hypot(verify[0].StandardError(), decode_error);
  RecordProperty("decode_window_mean", std::to_string(decode_window));
  RecordProperty("alpha_verify_mean", std::to_string(verify[0].Mean()));
  RecordProperty("alpha_coin_verify_mean", std::to_string(verify[1].Mean()));
  RecordProperty("alpha_standard_error", std::to_string(alpha_error));
  EXPECT_NEAR(verify[0].Mean(), decode_window, 3 * alpha_error)
      << "alpha: " << verify[0].Mean() << " distinct experts per verify pass and layer over "
      << verify[0].samples.size() << ", decode windows " << decode_window << ", standard error "
      << alpha_error;
  const double coin_error = std::hypot(verify[1].StandardError(), decode_error);
  EXPECT_LT(verify[1].Mean(), decode_window - 3 * coin_error)
      << "alpha-coin: " << verify[1].Mean() << ", decode windows " << decode_window
      << ", standard error " << coin_error;
}

// The full-batch verify passes' operator times are their forward passes' own: every category
// that a MoE pass runs is timed, and together they fit inside those passes' wall times (which add
// acceptance), not the whole run's target time (which adds the prefill and the smaller passes).
TEST(Speculative, FullBatchVerifyOperatorsAreThosePassesOwn) {
  Models m;
  const auto prompts = SyntheticPrompts(3, 4, 37, 6);
  const OperatorTimes before = m.target.times();
  const SpeculativeResult sd = RunSpeculative(m.target, m.draft, prompts, FixedAlpha(3, 0.5, 30));
  const OperatorTimes whole_run = m.target.times().Since(before);
  ASSERT_FALSE(sd.full_batch_verify_s.empty());
  double full_batch_s = 0;
  for (double s : sd.full_batch_verify_s) full_batch_s += s;
  const OperatorTimes& verify = sd.full_batch_verify_operators;
  EXPECT_GT(verify.attention_s, 0);
  EXPECT_GT(verify.router_s, 0);
  EXPECT_GT(verify.experts_s, 0);
  EXPECT_GT(verify.lm_head_s, 0);
  EXPECT_LE(verify.total(), full_batch_s);
  // The prefill and the last, smaller rounds are left out.
  EXPECT_LT(verify.total(), whole_run.total());
  EXPECT_LT(verify.experts_s, whole_run.experts_s);
}

TEST(Speculative, VocabularyMismatchIsRefused) {
  kernels::ThreadPool pool(1);
  const ModelWeights target = MakeSyntheticWeights(testing::TinyMixtral(37), 1, pool);
  const ModelWeights draft = MakeSyntheticWeights(testing::TinyLlama(40), 1, pool);
  Transformer t(target, pool), d(draft, pool);
  EXPECT_THROW(RunSpeculative(t, d, {{1, 2}}, SpeculativeOptions{}), base::Error);
}

// With width >= V^(L-1) beam search is exhaustive: it must return exactly the top-scoring
// sequences of all V^L, scored by the sum of their tokens' log-probabilities.
TEST(BeamSearch, ReturnsTheBestSequencesOfAnExhaustiveSearch) {
  Models m(4, 13);
  const TokenIds prompt = {2, 0, 3};
  const BeamResult beams = RunBeamSearch(m.target, prompt, 16, 3);
  ASSERT_EQ(beams.beams.size(), 16u);
  std::vector<std::pair<double, TokenIds>> all;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      for (int c = 0; c < 4; ++c) {
        const TokenIds continuation = {a, b, c};
        KvCache cache(m.target.config(), 16);
        TokenIds tokens = prompt;
        tokens.insert(tokens.end(), continuation.begin(), continuation.end() - 1);
        std::vector<SequenceInput> batch = {{&cache, tokens}};
        std::vector<float> logits;
        m.target.Forward(batch, {LogitRows::kAll, nullptr, nullptr, "test"}, logits);
        double score = 0;
        std::vector<float> log_p(4);
        for (int i = 0; i < 3; ++i) {
          kernels::LogSoftmax(logits.data() + (prompt.size() - 1 + i) * 4, 4, log_p.data());
          score += log_p[continuation[i]];
        }
        all.push_back({score, continuation});
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < 16; ++i) {
    EXPECT_NEAR(beams.beams[i].log_probability, all[i].first, 1e-4) << "rank " << i;
    EXPECT_EQ(beams.beams[i].tokens, all[i].second) << "rank " << i;
  }
  // Each step's selection (scoring, ranking, the kept caches) is timed within the step.
  EXPECT_GT(beams.selection_s, 0);
  EXPECT_LT(beams.selection_s, beams.decode_s);
  // Narrow beams are never better than the exhaustive best.
  const BeamResult narrow = RunBeamSearch(m.target, prompt, 2, 3);
  EXPECT_LE(narrow.beams[0].log_probability, all[0].first + 1e-9);
}

// A model that passes through to another and records what the workloads reserve and run.
class PassRecorder final : public ForwardModel {
 public:
  explicit PassRecorder(ForwardModel& model) : model_(model) {}
  const ExecutorConfig& config() const override { return model_.config(); }
  void Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
               std::vector<float>& logits) override {
    int64_t tokens = 0;
    for (const SequenceInput& s : batch) tokens += static_cast<int64_t>(s.tokens.size());
    pass_tokens.push_back(tokens);
    reserved_before_pass.push_back(reserved);
    model_.Forward(batch, options, logits);
  }
  void ReservePass(int64_t tokens) override {
    reserved = std::max(reserved, tokens);
    model_.ReservePass(tokens);
  }
  OperatorTimes& times() override { return model_.times(); }
  int64_t passes() const override { return model_.passes(); }
  KvCache NewCache(int64_t capacity) const override { return model_.NewCache(capacity); }
  std::string device() const override { return model_.device(); }

  int64_t reserved = 0;
  std::vector<int64_t> pass_tokens, reserved_before_pass;

 private:
  ForwardModel& model_;
};

void ExpectEveryPassReserved(const PassRecorder& model, const std::string& workload) {
  ASSERT_FALSE(model.pass_tokens.empty()) << workload;
  for (size_t i = 0; i < model.pass_tokens.size(); ++i) {
    EXPECT_LE(model.pass_tokens[i], model.reserved_before_pass[i])
        << workload << ": pass " << i << " of " << model.pass_tokens[i]
        << " tokens ran with scratch reserved for " << model.reserved_before_pass[i];
  }
}

// The first pass of a size would otherwise allocate its scratch and take the page faults inside
// its timing (ForwardModel::ReservePass): every workload reserves every pass it runs beforehand.
TEST(Workloads, ReserveEveryPassBeforeRunningIt) {
  Models m;
  const auto prompts = SyntheticPrompts(3, 7, 37, 4);
  {
    PassRecorder target(m.target);
    DecodeOptions options;
    options.output_tokens = 5;
    RunDecode(target, prompts, options);
    ExpectEveryPassReserved(target, "decode");
    EXPECT_EQ(target.pass_tokens.front(), 21);
  }
  {
    PassRecorder target(m.target);
    RunBeamSearch(target, SyntheticPrompts(1, 2, 37, 4)[0], 6, 4, nullptr, nullptr);
    ExpectEveryPassReserved(target, "beam");  // passes of 6 beams after a prompt of 2
  }
  for (const int64_t gamma : {1, 4}) {
    PassRecorder target(m.target), draft(m.draft);
    for (const double alpha : {0.0, 0.99}) {  // rounds that reject and that accept everything
      RunSpeculative(target, draft, SyntheticPrompts(3, 2, 37, 4), FixedAlpha(gamma, alpha, 12));
    }
    ExpectEveryPassReserved(target, "sd target");
    ExpectEveryPassReserved(draft, "sd draft");
  }
}

TEST(Decode, SameSeedSameTokensAndSampledDiffersFromGreedy) {
  Models m;
  const auto prompts = SyntheticPrompts(2, 4, 37, 3);
  DecodeOptions options;
  options.output_tokens = 12;
  options.temperature = 1.0;
  options.seed = 5;
  const DecodeResult a = RunDecode(m.target, prompts, options);
  const DecodeResult b = RunDecode(m.target, prompts, options);
  EXPECT_EQ(a.outputs, b.outputs);
  options.temperature = 0;
  EXPECT_NE(RunDecode(m.target, prompts, options).outputs, a.outputs);
  EXPECT_EQ(a.steps.size(), 12u);  // the prefill and 11 decode steps
}

}  // namespace
}  // namespace moelab::executor
