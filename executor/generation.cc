#include "executor/generation.h"

#include "executor/beam_selection.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>

#include "kernels/elementwise.h"
#include "base/error.h"
#include "base/hash.h"

namespace moelab::executor {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One random stream per sequence, from (seed, purpose, sequence).
std::mt19937_64 StreamFor(uint64_t seed, uint64_t purpose, uint64_t sequence) {
  return std::mt19937_64(
      base::SplitMix64(seed ^ base::SplitMix64(purpose ^ base::SplitMix64(sequence))));
}

double Uniform(std::mt19937_64& rng) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng);
}

// A token other than `token`, uniform over the other vocab - 1 (vocab >= 2).
int32_t OtherToken(int32_t token, int64_t vocab, std::mt19937_64& rng) {
  const auto other = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab - 1));
  return other >= token ? other + 1 : other;
}

std::vector<double> Distribution(const float* logits, int64_t vocab, double temperature) {
  std::vector<double> p(static_cast<size_t>(vocab));
  double max_logit = logits[0];
  for (int64_t i = 1; i < vocab; ++i) max_logit = std::max<double>(max_logit, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += p[i] = std::exp((logits[i] - max_logit) / temperature);
  for (double& v : p) v /= sum;
  return p;
}

int32_t Sample(const std::vector<double>& p, std::mt19937_64& rng) {
  const double u = Uniform(rng);
  double cumulative = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    cumulative += p[i];
    if (u < cumulative) return static_cast<int32_t>(i);
  }
  // Round-off left u above the total: the last token with nonzero probability.
  for (size_t i = p.size(); i-- > 0;) {
    if (p[i] > 0) return static_cast<int32_t>(i);
  }
  return 0;
}

int64_t CacheCapacity(const ForwardModel& model, int64_t prompt, int64_t extra) {
  const int64_t needed = prompt + extra;
  if (needed > model.config().max_positions) {
    throw base::Error("prompt (" + std::to_string(prompt) + ") plus generated tokens need " +
                      std::to_string(needed) + " positions, more than model '" +
                      model.config().name + "' allows (max_positions " +
                      std::to_string(model.config().max_positions) + ")");
  }
  return needed;
}

int64_t PromptTokens(const std::vector<TokenIds>& prompts) {
  int64_t tokens = 0;
  for (const TokenIds& p : prompts) tokens += static_cast<int64_t>(p.size());
  return tokens;
}

void CheckPrompts(const std::vector<TokenIds>& prompts) {
  if (prompts.empty()) throw base::Error("no prompts: batch must be at least 1");
  for (const TokenIds& p : prompts) {
    if (p.empty()) throw base::Error("every prompt needs at least one token");
  }
}

}  // namespace

std::vector<TokenIds> SyntheticPrompts(int64_t batch, int64_t length, int64_t vocab,
                                       uint64_t seed) {
  if (batch < 1) throw base::Error("batch must be at least 1, got " + std::to_string(batch));
  if (length < 1)
    throw base::Error("prompt length must be at least 1, got " + std::to_string(length));
  std::vector<TokenIds> prompts(static_cast<size_t>(batch));
  for (int64_t s = 0; s < batch; ++s) {
    std::mt19937_64 rng = StreamFor(seed, 0x70726f6d7074ull, static_cast<uint64_t>(s));
    std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(vocab - 1));
    for (int64_t i = 0; i < length; ++i) prompts[s].push_back(token(rng));
  }
  return prompts;
}

int32_t PickToken(const float* logits, int64_t vocab, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0) return static_cast<int32_t>(kernels::ArgMax(logits, vocab));
  return Sample(Distribution(logits, vocab, temperature), rng);
}

DecodeResult RunDecode(ForwardModel& model, const std::vector<TokenIds>& prompts,
                       const DecodeOptions& options) {
  CheckPrompts(prompts);
  if (options.output_tokens < 0) throw base::Error("output tokens must be >= 0");
  const int64_t vocab = model.config().vocab_size;
  const int64_t batch = static_cast<int64_t>(prompts.size());
  size_t longest = 0;
  for (const TokenIds& p : prompts) longest = std::max(longest, p.size());
  std::vector<KvCache> caches;
  caches.reserve(prompts.size());
  if (options.synthetic_context < 0)
    throw base::Error("a synthetic context must be >= 0 positions");
  for (size_t s = 0; s < prompts.size(); ++s) {
    caches.push_back(model.NewCache(
        CacheCapacity(model, static_cast<int64_t>(longest) + options.synthetic_context,
                      std::max<int64_t>(options.output_tokens, 1))));
    if (options.synthetic_context > 0)
      caches.back().FillSynthetic(options.synthetic_context, options.seed + s);
  }
  std::vector<std::mt19937_64> rngs;
  for (int64_t s = 0; s < batch; ++s)
    rngs.push_back(StreamFor(options.seed, 0x6465636f6465ull, static_cast<uint64_t>(s)));

  DecodeResult result;
  result.outputs.resize(prompts.size());
  std::vector<SequenceInput> inputs(prompts.size());
  for (size_t s = 0; s < prompts.size(); ++s) inputs[s] = {&caches[s], prompts[s]};
  std::vector<float> logits;
  ForwardOptions forward{LogitRows::kLastPerSequence, options.routing, options.record, "prefill"};
  model.ReservePass(std::max(PromptTokens(prompts), batch));
  const OperatorTimes before_prefill = model.times();
  Clock::time_point start = Clock::now();
  model.Forward(inputs, forward, logits);
  result.prefill_s = Since(start);
  const OperatorTimes after_prefill = model.times();
  result.prefill_operators = after_prefill.Since(before_prefill);
  const int64_t prompt_tokens = PromptTokens(prompts);
  result.steps.push_back({"prefill", prompt_tokens, result.prefill_s, prompt_tokens});
  if (options.output_tokens == 0) return result;
  for (int64_t s = 0; s < batch; ++s) {
    result.outputs[s].push_back(
        PickToken(logits.data() + s * vocab, vocab, options.temperature, rngs[s]));
  }
  forward.step_kind = "decode";
  for (int64_t step = 1; step < options.output_tokens; ++step) {
    for (int64_t s = 0; s < batch; ++s) inputs[s].tokens = {result.outputs[s].back()};
    start = Clock::now();
    model.Forward(inputs, forward, logits);
    for (int64_t s = 0; s < batch; ++s) {
      result.outputs[s].push_back(
          PickToken(logits.data() + s * vocab, vocab, options.temperature, rngs[s]));
    }
    const double seconds = Since(start);
    result.decode_s += seconds;
    result.steps.push_back({"decode", batch, seconds, batch});
  }
  result.decode_operators = model.times().Since(after_prefill);
  return result;
}

BeamResult RunBeamSearch(ForwardModel& model, const TokenIds& prompt, int64_t width,
                         int64_t output_tokens, routing::RoutingSource* routing,
                         routing::RoutingTrace* record) {
  CheckPrompts({prompt});
  if (width < 1) throw base::Error("beam width must be at least 1, got " + std::to_string(width));
  if (output_tokens < 1) throw base::Error("beam search needs at least 1 output token");
  const int64_t vocab = model.config().vocab_size;
  const int64_t capacity = CacheCapacity(model, static_cast<int64_t>(prompt.size()), output_tokens);
  BeamResult result;
  KvCache root = model.NewCache(capacity);
  // Every cache the search can hold at once, allocated before the clock starts as the root's is
  // (a server allocates its KV pool once): `width` beams, and at most `width` - 1 children copied
  // from a parent in a step (each kept parent passes its own cache to its first child). Allocated
  // in the steps, each new cache's first touch (page faults: 1.7 ms for a 0.4 MB cache on the
  // AVX-512 guest) was most of the steps' time beside the pass and the ranking at widths 2-6.
  std::vector<std::unique_ptr<KvCache>> spare_caches;
  for (int64_t c = 0; c < 2 * width - 1; ++c)
    spare_caches.push_back(std::make_unique<KvCache>(model.NewCache(capacity)));
  std::vector<SequenceInput> inputs = {{&root, prompt}};
  std::vector<float> logits;
  ForwardOptions forward{LogitRows::kAll, routing, record, "prefill"};
  forward.logits = LogitRows::kLastPerSequence;
  model.ReservePass(std::max(static_cast<int64_t>(prompt.size()), width));
  Clock::time_point start = Clock::now();
  model.Forward(inputs, forward, logits);
  std::vector<float> log_probabilities(static_cast<size_t>(vocab));
  kernels::LogSoftmax(logits.data(), vocab, log_probabilities.data());

  std::vector<BeamCandidate> candidates;
  std::vector<double> beam_log_probabilities;
  for (int64_t t = 0; t < vocab; ++t)
    candidates.push_back({log_probabilities[t], 0, static_cast<int32_t>(t)});
  const int64_t first = std::min(width, vocab);
  std::partial_sort(candidates.begin(), candidates.begin() + first, candidates.end(),
                    BetterBeamCandidate);
  std::vector<Beam> beams;
  std::vector<std::unique_ptr<KvCache>> caches;
  for (int64_t b = 0; b < first; ++b) {
    beams.push_back({{candidates[b].token}, candidates[b].score});
    caches.push_back(std::move(spare_caches.back()));
    spare_caches.pop_back();
    caches.back()->CopyFrom(root);
  }
  result.prefill_s = Since(start);
  result.steps.push_back({"prefill", static_cast<int64_t>(prompt.size()), result.prefill_s,
                          static_cast<int64_t>(prompt.size())});

  forward.logits = LogitRows::kAll;
  forward.step_kind = "beam";
  for (int64_t step = 1; step < output_tokens; ++step) {
    start = Clock::now();
    const int64_t alive = static_cast<int64_t>(beams.size());
    inputs.resize(static_cast<size_t>(alive));
    for (int64_t b = 0; b < alive; ++b) inputs[b] = {caches[b].get(), {beams[b].tokens.back()}};
    model.Forward(inputs, forward, logits);
    const Clock::time_point selection_start = Clock::now();
    const int64_t kept = std::min<int64_t>(width, alive * vocab);
    beam_log_probabilities.resize(static_cast<size_t>(alive));
    for (int64_t b = 0; b < alive; ++b)
      beam_log_probabilities[static_cast<size_t>(b)] =
          beams[static_cast<size_t>(b)].log_probability;
    RankBeamCandidates(logits.data(), alive, vocab, beam_log_probabilities, kept, candidates);
    // A parent's cache goes to its first kept child as it is; its other kept children copy it
    // into caches of the steps before (allocated once). Copying every kept beam's cache was a
    // third to two thirds of a step's time beside the forward pass (widths 6 and 2, 8 layers).
    std::vector<Beam> next_beams;
    std::vector<std::unique_ptr<KvCache>> next_caches;
    std::vector<int64_t> first_child(static_cast<size_t>(alive), -1);
    for (int64_t i = 0; i < kept; ++i) {
      const BeamCandidate& c = candidates[i];
      Beam beam = beams[c.parent];
      beam.tokens.push_back(c.token);
      beam.log_probability = c.score;
      next_beams.push_back(std::move(beam));
      int64_t& first = first_child[static_cast<size_t>(c.parent)];
      if (first < 0) {
        first = i;
        next_caches.push_back(std::move(caches[c.parent]));
        continue;
      }
      if (spare_caches.empty()) {
        next_caches.push_back(std::make_unique<KvCache>(model.NewCache(capacity)));
      } else {
        next_caches.push_back(std::move(spare_caches.back()));
        spare_caches.pop_back();
      }
      next_caches.back()->CopyFrom(*next_caches[static_cast<size_t>(first)]);
    }
    beams = std::move(next_beams);
    for (std::unique_ptr<KvCache>& cache : caches) {
      if (cache) spare_caches.push_back(std::move(cache));
    }
    caches = std::move(next_caches);
    const double seconds = Since(start);
    result.decode_s += seconds;
    result.selection_s += Since(selection_start);
    result.steps.push_back({"beam", alive, seconds, alive});
  }
  result.beams = std::move(beams);
  return result;
}

std::string ToString(Acceptance acceptance) {
  switch (acceptance) {
    case Acceptance::kGreedy:
      return "greedy";
    case Acceptance::kRejectionSampling:
      return "sampling";
    case Acceptance::kTargetAlpha:
      return "alpha";
    case Acceptance::kCoinAlpha:
      return "alpha-coin";
  }
  return "?";
}

Acceptance AcceptanceFromString(const std::string& name) {
  if (name == "greedy") return Acceptance::kGreedy;
  if (name == "sampling") return Acceptance::kRejectionSampling;
  if (name == "alpha") return Acceptance::kTargetAlpha;
  if (name == "alpha-coin") return Acceptance::kCoinAlpha;
  throw base::Error("unknown acceptance '" + name +
                    "': expected greedy, sampling, alpha or alpha-coin");
}

bool IsFixedRate(Acceptance acceptance) {
  return acceptance == Acceptance::kTargetAlpha || acceptance == Acceptance::kCoinAlpha;
}

void SpeculativeOptions::Validate() const {
  if (gamma < 1) throw base::Error("gamma must be at least 1, got " + std::to_string(gamma));
  if (!(alpha >= 0 && alpha < 1))
    throw base::Error("alpha must be in [0, 1), got " + std::to_string(alpha));
  if (!(temperature > 0)) throw base::Error("temperature must be > 0 for rejection sampling");
  if (output_tokens < 1) throw base::Error("output tokens must be at least 1");
}

double SpeculativeResult::Sigma(int64_t gamma) const {
  if (accepted_per_round.empty()) return 0;
  double emitted = 0;
  for (int64_t accepted : accepted_per_round) emitted += static_cast<double>(accepted + 1);
  return emitted / static_cast<double>(accepted_per_round.size()) / static_cast<double>(gamma + 1);
}

namespace {

// One run of RunSpeculative, in its steps: caches and streams, the kTargetAlpha continuation, the
// prefill of both models, then rounds of a draft step and a verify step until every sequence has
// its tokens.
class SpeculativeRun {
 public:
  SpeculativeRun(ForwardModel& target, ForwardModel& draft, const std::vector<TokenIds>& prompts,
                 const SpeculativeOptions& options)
      : target_(target),
        draft_(draft),
        prompts_(prompts),
        options_(options),
        vocab_(target.config().vocab_size),
        batch_(static_cast<int64_t>(prompts.size())),
        gamma_(options.gamma),
        total_(options.output_tokens),
        sampling_(options.acceptance == Acceptance::kRejectionSampling),
        target_alpha_(options.acceptance == Acceptance::kTargetAlpha),
        temperature_(sampling_ ? options.temperature : 0.0) {
    for (const TokenIds& p : prompts) longest_ = std::max(longest_, p.size());
  }

  SpeculativeResult Run() {
    MakeCaches();
    if (target_alpha_) ComputeContinuation();
    Prefill();
    std::vector<int64_t> active = Unfinished({});
    while (!active.empty()) {
      ++result_.rounds;
      const std::vector<int64_t> draft_lengths = DraftStep(active);
      VerifyStep(active, draft_lengths);
      active = Unfinished(active);
    }
    result_.decode_s = result_.draft_s + result_.verify_s;
    return std::move(result_);
  }

 private:
  void MakeCaches() {
    const int64_t extra = total_ + gamma_ + 2;
    target_caches_.reserve(prompts_.size());
    draft_caches_.reserve(prompts_.size());
    if (options_.synthetic_context < 0)
      throw base::Error("a synthetic context must be >= 0 positions");
    const int64_t cached = static_cast<int64_t>(longest_) + options_.synthetic_context;
    for (int64_t s = 0; s < batch_; ++s) {
      target_caches_.push_back(target_.NewCache(CacheCapacity(target_, cached, extra)));
      draft_caches_.push_back(draft_.NewCache(CacheCapacity(draft_, cached, extra)));
      if (options_.synthetic_context > 0) {
        target_caches_.back().FillSynthetic(options_.synthetic_context,
                                            options_.seed + static_cast<uint64_t>(s));
        draft_caches_.back().FillSynthetic(options_.synthetic_context,
                                           options_.seed + static_cast<uint64_t>(s) + 7919);
      }
    }
    for (int64_t s = 0; s < batch_; ++s)
      rngs_.push_back(StreamFor(options_.seed, 0x73706563ull, static_cast<uint64_t>(s)));
  }

  // kTargetAlpha: the target's own continuation of every prompt, far enough for the last round's
  // drafts (untimed; the same synthetic context and forced routing as the run, nothing recorded).
  void ComputeContinuation() {
    if (vocab_ < 2) throw base::Error("--acceptance alpha needs a vocabulary of at least 2 tokens");
    if (options_.continuation) {
      const std::vector<TokenIds>& given = *options_.continuation;
      bool long_enough = given.size() == prompts_.size();
      for (size_t s = 0; long_enough && s < given.size(); ++s)
        long_enough = static_cast<int64_t>(given[s].size()) >= total_ + gamma_;
      if (!long_enough) {
        throw base::Error("the given continuation needs " + std::to_string(prompts_.size()) +
                          " sequences of at least " + std::to_string(total_ + gamma_) + " tokens");
      }
      continuation_ = &given;
      return;
    }
    DecodeOptions plain;
    plain.output_tokens = total_ + gamma_;
    plain.synthetic_context = options_.synthetic_context;
    plain.seed = options_.seed;
    plain.routing = options_.routing;
    const OperatorTimes before = target_.times();  // the run's operator times stay the rounds'
    decoded_ = RunDecode(target_, prompts_, plain).outputs;
    target_.times() = before;
    continuation_ = &decoded_;
  }

  // The continuation's token at `position` of sequence s (kTargetAlpha).
  int32_t Own(int64_t s, size_t position) const { return (*continuation_)[s][position]; }

  // Both models' prefill; the target's logits give each sequence's first token.
  void Prefill() {
    result_.outputs.resize(prompts_.size());
    inputs_.resize(prompts_.size());
    // A verify pass is each sequence's last emitted token and its gamma drafts; a draft pass is at
    // most two tokens per sequence (after a round that accepted every draft).
    target_.ReservePass(std::max(PromptTokens(prompts_), batch_ * (gamma_ + 1)));
    draft_.ReservePass(std::max(PromptTokens(prompts_), batch_ * 2));
    // Each model's logits in its own buffer: one buffer shared by both shrank to the draft's rows
    // every round, and the verify pass's growing it back zero-filled n * gamma rows of the
    // vocabulary (6 MB at batch 12, gamma 4) inside the target's LM head. (The target's prefill
    // still shrinks its own, so the first verify pass of a run grows it once.)
    target_logits_.resize(static_cast<size_t>(batch_ * (gamma_ + 1) * vocab_));
    draft_logits_.resize(static_cast<size_t>(batch_ * draft_.config().vocab_size));
    const Clock::time_point start = Clock::now();
    for (int64_t s = 0; s < batch_; ++s) inputs_[s] = {&target_caches_[s], prompts_[s]};
    target_.Forward(inputs_,
                    {LogitRows::kLastPerSequence, options_.routing, options_.record, "prefill"},
                    target_logits_);
    for (int64_t s = 0; s < batch_; ++s) {
      int32_t first = PickToken(target_logits_.data() + s * vocab_, vocab_, temperature_, rngs_[s]);
      if (target_alpha_ && first != Own(s, 0)) {
        ++result_.reference_mismatches;
        first = Own(s, 0);
      }
      result_.outputs[s].push_back(first);
    }
    for (int64_t s = 0; s < batch_; ++s) inputs_[s] = {&draft_caches_[s], prompts_[s]};
    draft_.Forward(inputs_, {LogitRows::kLastPerSequence, nullptr, nullptr, "draft-prefill"},
                   draft_logits_);
    result_.prefill_s = Since(start);
    const int64_t positions = static_cast<int64_t>(longest_) * batch_;
    result_.steps.push_back({"prefill", positions, result_.prefill_s, positions});
    draft_pending_.resize(prompts_.size());
    target_pending_.resize(prompts_.size());
    for (int64_t s = 0; s < batch_; ++s)
      draft_pending_[s] = target_pending_[s] = {result_.outputs[s].back()};
    drafted_.resize(prompts_.size());
    draft_distributions_.resize(prompts_.size());
  }

  // The sequences of `active` (every one when empty, before the first round) still short of
  // their tokens.
  std::vector<int64_t> Unfinished(const std::vector<int64_t>& active) const {
    std::vector<int64_t> still;
    for (int64_t s = 0; s < batch_; ++s) {
      if (!active.empty() && std::find(active.begin(), active.end(), s) == active.end()) continue;
      if (static_cast<int64_t>(result_.outputs[s].size()) < total_) still.push_back(s);
    }
    return still;
  }

  // gamma draft passes over the active sequences; returns their draft caches' lengths before.
  std::vector<int64_t> DraftStep(const std::vector<int64_t>& active) {
    const int64_t n = static_cast<int64_t>(active.size());
    const Clock::time_point start = Clock::now();
    for (int64_t s : active) {
      drafted_[s].clear();
      draft_distributions_[s].clear();
    }
    std::vector<int64_t> draft_lengths(static_cast<size_t>(n));
    int64_t draft_positions = n * (gamma_ - 1);
    for (int64_t i = 0; i < n; ++i) {
      draft_lengths[i] = draft_caches_[active[i]].length();
      draft_positions += static_cast<int64_t>(draft_pending_[active[i]].size());
    }
    inputs_.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < gamma_; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t s = active[i];
        inputs_[i] = {&draft_caches_[s], j == 0 ? draft_pending_[s] : TokenIds{drafted_[s].back()}};
      }
      draft_.Forward(inputs_, {LogitRows::kLastPerSequence, nullptr, nullptr, "draft"},
                     draft_logits_);
      for (int64_t i = 0; i < n; ++i) Propose(active[i], j, draft_logits_.data() + i * vocab_);
    }
    const double seconds = Since(start);
    result_.draft_s += seconds;
    result_.steps.push_back({"draft", n * gamma_, seconds, draft_positions});
    return draft_lengths;
  }

  // Sequence s's draft j from the draft's logits `row`.
  void Propose(int64_t s, int64_t j, const float* row) {
    if (sampling_) {
      draft_distributions_[s].push_back(Distribution(row, vocab_, options_.temperature));
      drafted_[s].push_back(Sample(draft_distributions_[s].back(), rngs_[s]));
      return;
    }
    int32_t proposal = static_cast<int32_t>(kernels::ArgMax(row, vocab_));
    if (target_alpha_) {
      // The draft's pick is made (and timed) as a real draft's would be; what it proposes is the
      // target's next token with probability alpha, else another one.
      const int32_t own = Own(s, result_.outputs[s].size() + static_cast<size_t>(j));
      proposal = Uniform(rngs_[s]) < options_.alpha ? own : OtherToken(own, vocab_, rngs_[s]);
    }
    drafted_[s].push_back(proposal);
  }

  // The last emitted token and the gamma drafts of every active sequence in one target pass, then
  // each sequence's acceptance and the rollback of both caches.
  void VerifyStep(const std::vector<int64_t>& active, const std::vector<int64_t>& draft_lengths) {
    const int64_t n = static_cast<int64_t>(active.size());
    const Clock::time_point start = Clock::now();
    std::vector<int64_t> target_lengths(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = active[i];
      target_lengths[i] = target_caches_[s].length();
      TokenIds tokens = target_pending_[s];
      tokens.insert(tokens.end(), drafted_[s].begin(), drafted_[s].end());
      inputs_[i] = {&target_caches_[s], tokens};
    }
    const OperatorTimes before_verify = target_.times();
    target_.Forward(inputs_, {LogitRows::kAll, options_.routing, options_.record, "verify"},
                    target_logits_);
    if (n == batch_) result_.full_batch_verify_operators += target_.times().Since(before_verify);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = active[i];
      TokenIds emitted;
      const int64_t accepted =
          Accept(s, target_logits_.data() + i * (gamma_ + 1) * vocab_, emitted);
      result_.accepted_per_round.push_back(accepted);
      // Roll back what was not accepted: the target keeps its pending token and the accepted
      // drafts; the draft keeps its pending tokens and the accepted drafts it has processed.
      target_caches_[s].Truncate(target_lengths[i] +
                                 static_cast<int64_t>(target_pending_[s].size()) + accepted);
      draft_caches_[s].Truncate(draft_lengths[i] + static_cast<int64_t>(draft_pending_[s].size()) +
                                std::min(accepted, gamma_ - 1));
      target_pending_[s] = {emitted.back()};
      draft_pending_[s] = accepted == gamma_ ? TokenIds{drafted_[s].back(), emitted.back()}
                                             : TokenIds{emitted.back()};
      for (int32_t token : emitted) {
        if (static_cast<int64_t>(result_.outputs[s].size()) < total_)
          result_.outputs[s].push_back(token);
      }
    }
    const double seconds = Since(start);
    result_.verify_s += seconds;
    if (n == batch_) result_.full_batch_verify_s.push_back(seconds);
    result_.steps.push_back({"verify", n * (gamma_ + 1), seconds, n * (gamma_ + 1)});
  }

  // Sequence s's drafts against the verify pass's logits `rows` (gamma + 1 rows): the accepted
  // drafts, then the correction or (all accepted) the bonus token, into `emitted`; returns how
  // many drafts were accepted.
  int64_t Accept(int64_t s, const float* rows, TokenIds& emitted) {
    int64_t accepted = 0;
    for (; accepted < gamma_; ++accepted) {
      const int32_t proposal = drafted_[s][accepted];
      const int32_t correction = Correction(s, accepted, rows + accepted * vocab_, proposal,
                                            result_.outputs[s].size() + emitted.size());
      if (correction >= 0) {
        emitted.push_back(correction);
        return accepted;
      }
      emitted.push_back(proposal);
    }
    const int32_t bonus = PickToken(rows + gamma_ * vocab_, vocab_, temperature_, rngs_[s]);
    if (target_alpha_) {
      const int32_t own = Own(s, result_.outputs[s].size() + emitted.size());
      if (bonus != own) ++result_.reference_mismatches;
      emitted.push_back(own);
    } else {
      emitted.push_back(bonus);
    }
    return accepted;
  }

  // The token replacing draft j of sequence s (the target's logits at it: `row`; its position in
  // the output: `position`), or -1 when the draft is accepted.
  int32_t Correction(int64_t s, int64_t j, const float* row, int32_t proposal, size_t position) {
    switch (options_.acceptance) {
      case Acceptance::kGreedy: {
        const int32_t best = static_cast<int32_t>(kernels::ArgMax(row, vocab_));
        return proposal != best ? best : -1;
      }
      case Acceptance::kTargetAlpha: {
        const int32_t own = Own(s, position);
        if (static_cast<int32_t>(kernels::ArgMax(row, vocab_)) != own)
          ++result_.reference_mismatches;
        return proposal != own ? own : -1;
      }
      case Acceptance::kCoinAlpha:
        return Uniform(rngs_[s]) < options_.alpha
                   ? -1
                   : static_cast<int32_t>(kernels::ArgMax(row, vocab_));
      case Acceptance::kRejectionSampling:
        break;
    }
    const std::vector<double> p = Distribution(row, vocab_, options_.temperature);
    const std::vector<double>& q = draft_distributions_[s][j];
    if (Uniform(rngs_[s]) * q[proposal] < p[proposal]) return -1;
    std::vector<double> residual(p.size());
    double sum = 0;
    for (size_t t = 0; t < p.size(); ++t) sum += residual[t] = std::max(0.0, p[t] - q[t]);
    if (sum > 0) {
      for (double& r : residual) r /= sum;
      return Sample(residual, rngs_[s]);
    }
    return Sample(p, rngs_[s]);
  }

  ForwardModel& target_;
  ForwardModel& draft_;
  const std::vector<TokenIds>& prompts_;
  const SpeculativeOptions& options_;
  const int64_t vocab_, batch_, gamma_, total_;
  const bool sampling_, target_alpha_;
  const double temperature_;
  size_t longest_ = 0;
  std::vector<KvCache> target_caches_, draft_caches_;
  std::vector<std::mt19937_64> rngs_;
  const std::vector<TokenIds>* continuation_ = nullptr;  // kTargetAlpha: given, or decoded_
  std::vector<TokenIds> decoded_;
  SpeculativeResult result_;
  std::vector<float> target_logits_, draft_logits_;
  std::vector<SequenceInput> inputs_;
  // Tokens emitted but not yet in each model's cache.
  std::vector<TokenIds> draft_pending_, target_pending_;
  std::vector<TokenIds> drafted_;
  std::vector<std::vector<std::vector<double>>> draft_distributions_;
};

}  // namespace

SpeculativeResult RunSpeculative(ForwardModel& target, ForwardModel& draft,
                                 const std::vector<TokenIds>& prompts,
                                 const SpeculativeOptions& options) {
  options.Validate();
  CheckPrompts(prompts);
  if (draft.config().vocab_size != target.config().vocab_size) {
    throw base::Error("draft '" + draft.config().name + "' has vocabulary " +
                      std::to_string(draft.config().vocab_size) + " but target '" +
                      target.config().name + "' has " + std::to_string(target.config().vocab_size) +
                      "; they must match");
  }
  return SpeculativeRun(target, draft, prompts, options).Run();
}

}  // namespace moelab::executor
