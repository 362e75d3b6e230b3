#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "executor/transformer.h"

namespace moelab::executor {

// The workloads the executor runs end to end: prefill, batched decode, beam search and
// speculative decoding. Times are wall-clock seconds of the forward passes (and, for SD, the
// acceptance logic), measured with steady_clock.

using TokenIds = std::vector<int32_t>;

// `batch` seeded prompts of `length` tokens in [0, vocab).
std::vector<TokenIds> SyntheticPrompts(int64_t batch, int64_t length, int64_t vocab, uint64_t seed);

// Greedy (temperature 0: the first maximum) or a sample from softmax(logits / temperature).
int32_t PickToken(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng);

struct StepTime {
  std::string kind;  // "prefill", "decode", "draft", "verify"
  int64_t tokens = 0;
  double seconds = 0;
  // Positions the passes processed. A draft step's first pass also feeds each sequence's pending
  // tokens: two (the last draft and the bonus token) after a round that accepted all gamma
  // drafts, so positions = tokens + those sequences. Other steps: = tokens.
  int64_t positions = 0;
};

struct DecodeOptions {
  int64_t output_tokens = 16;  // per sequence, including the one the prefill produces
  // Positions of seeded keys and values each sequence's cache starts with before its prompt
  // (KvCache::FillSynthetic): decode at a long context without its prefill.
  int64_t synthetic_context = 0;
  double temperature = 0;  // 0: greedy
  uint64_t seed = 1;
  routing::RoutingSource* routing = nullptr;
  routing::RoutingTrace* record = nullptr;
};

struct DecodeResult {
  std::vector<TokenIds> outputs;  // per sequence, output_tokens each
  std::vector<StepTime> steps;    // the prefill, then one per decode step
  double prefill_s = 0;
  double decode_s = 0;  // all decode steps
  // The model's operator times spent in the prefill and in all decode steps.
  OperatorTimes prefill_operators;
  OperatorTimes decode_operators;
};

// Prefill every prompt in one pass (its logits give the first token), then decode one token per
// sequence per step. output_tokens = 0 runs the prefill only.
DecodeResult RunDecode(ForwardModel& model, const std::vector<TokenIds>& prompts,
                       const DecodeOptions& options);

struct Beam {
  TokenIds tokens;
  double log_probability = 0;
};

struct BeamResult {
  std::vector<Beam> beams;  // best first
  std::vector<StepTime> steps;
  double prefill_s = 0;
  double decode_s = 0;
  // Of decode_s, the time beside the forward passes: scoring each beam's vocabulary, ranking, and
  // copying the kept beams' KV caches (what a decode of `width` sequences does not do).
  double selection_s = 0;
};

// Beam search of `width` beams over `output_tokens` tokens from one prompt: each step scores every
// (beam, token) continuation by its total log-probability and keeps the `width` best (ties: lower
// beam, then lower token), copying the parent's KV cache into each kept beam.
BeamResult RunBeamSearch(ForwardModel& model, const TokenIds& prompt, int64_t width,
                         int64_t output_tokens, routing::RoutingSource* routing = nullptr,
                         routing::RoutingTrace* record = nullptr);

// How a drafted token is accepted.
//  kGreedy: when it equals the target's argmax (output = the target's greedy decode).
//  kRejectionSampling: Leviathan/Chen: accept with probability min(1, p/q), else resample from
//    normalize(max(0, p - q)); the output is distributed exactly as the target's samples.
//  kTargetAlpha ("alpha"): synthetic weights behaving like a real draft at acceptance rate alpha.
//    Each drafted token is, with probability alpha (a seeded coin per position), the target's own
//    next token at that position (its greedy decode of the same prompt, run untimed before the
//    rounds), otherwise a token the target would not emit; verification is greedy against that
//    continuation, so the output is the target's greedy decode and the verify pass carries the
//    target's continuation, which routes as consecutive decode tokens do. The draft still runs
//    every forward pass on those tokens. Where the target's argmax in a verify pass differs from
//    its greedy decode (rounding under another pass shape), the continuation still rules and the
//    mismatch is counted (SpeculativeResult::reference_mismatches).
//  kCoinAlpha ("alpha-coin"): each drafted token, whatever it is (the draft's argmax), accepted
//    with probability alpha, the first rejected replaced by the target's argmax. Synthetic drafts
//    propose the same few tokens again and again, so a verify pass routes its tokens to nearly
//    the same experts: verification looks cheaper than in any real model. Kept to measure that.
enum class Acceptance { kGreedy, kRejectionSampling, kTargetAlpha, kCoinAlpha };
std::string ToString(Acceptance acceptance);
// greedy | sampling | alpha | alpha-coin
Acceptance AcceptanceFromString(const std::string& name);
bool IsFixedRate(Acceptance acceptance);  // alpha or alpha-coin: --alpha applies

struct SpeculativeOptions {
  int64_t gamma = 4;
  int64_t synthetic_context = 0;  // target and draft caches, as DecodeOptions
  Acceptance acceptance = Acceptance::kGreedy;
  double alpha = 0.8;        // kTargetAlpha and kCoinAlpha
  double temperature = 1.0;  // kRejectionSampling only
  int64_t output_tokens = 16;
  uint64_t seed = 1;
  routing::RoutingSource* routing = nullptr;
  routing::RoutingTrace* record = nullptr;
  // kTargetAlpha: the target's greedy decode of these prompts (RunDecode with the same synthetic
  // context, seed and routing), at least output_tokens + gamma tokens each, for a caller that runs
  // the same prompts again; null: RunSpeculative decodes it itself.
  const std::vector<TokenIds>* continuation = nullptr;

  void Validate() const;
};

struct SpeculativeResult {
  std::vector<TokenIds> outputs;
  std::vector<StepTime> steps;
  double prefill_s = 0;  // target and draft prefill
  double decode_s = 0;   // all rounds
  int64_t rounds = 0;
  std::vector<int64_t> accepted_per_round;  // drafted tokens accepted, per sequence-round
  double draft_s = 0;
  double verify_s = 0;
  std::vector<double> full_batch_verify_s;  // verify passes that carried every sequence
  // The target's operator times summed over those passes (their forward only).
  OperatorTimes full_batch_verify_operators;

  // kTargetAlpha: checked positions where the target's argmax in the verify pass differed from
  // its greedy decode's token (the continuation was kept); 0 in exact arithmetic.
  int64_t reference_mismatches = 0;

  // Tokens emitted per sequence-round over gamma + 1 (MoESD's sigma).
  double Sigma(int64_t gamma) const;
};

SpeculativeResult RunSpeculative(ForwardModel& target, ForwardModel& draft,
                                 const std::vector<TokenIds>& prompts,
                                 const SpeculativeOptions& options);

}  // namespace moelab::executor
