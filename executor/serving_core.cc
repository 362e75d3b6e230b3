#include "executor/serving_core.h"

#include <algorithm>
#include <string>
#include <utility>

#include "base/error.h"
#include "kernels/elementwise.h"

namespace moelab::executor {
namespace {

using scheduler::BatchEntry;

std::string Id(int64_t request_id) { return "request " + std::to_string(request_id); }

// The scheduler and the engine each keep their own account of a sequence; they must agree.
void Require(bool agree, int64_t request_id, const std::string& what) {
  if (!agree)
    throw base::Error("serving engine: the scheduler's plan disagrees with " + Id(request_id) +
                      ": " + what);
}

}  // namespace

ServingCore::ServingCore(ForwardModel& model, scheduler::SchedulerConfig config,
                         ServingSpeculation speculation)
    : model_(model),
      scheduler_((config.Validate(), config)),
      cache_pool_(config.max_running_sequences),
      draft_cache_pool_(config.max_running_sequences),
      speculation_(speculation) {
  const int64_t per_step = speculation_.draft ? speculation_.gamma + 1 : 1;
  if (speculation_.draft && speculation_.gamma < 1)
    throw base::Error("--gamma " + std::to_string(speculation_.gamma) + ": expected at least 1");
  if (config.decode_tokens_per_step != per_step) {
    throw base::Error("decode_tokens_per_step " + std::to_string(config.decode_tokens_per_step) +
                      ": the serving engine verifies " + std::to_string(per_step) +
                      " positions per decode (" +
                      (speculation_.draft ? "gamma + 1 with speculative decoding"
                                          : "1: no draft model for speculative decoding") +
                      ")");
  }
  if (speculation_.fixed_rate) speculation_.fixed_rate->Validate();
  if (speculation_.draft && speculation_.draft->config().vocab_size != model_.config().vocab_size) {
    throw base::Error("draft '" + speculation_.draft->config().name + "' has vocabulary " +
                      std::to_string(speculation_.draft->config().vocab_size) + " but target '" +
                      model_.config().name + "' has " + std::to_string(model_.config().vocab_size) +
                      "; they must match");
  }
  if (config.preemption != scheduler::PreemptionMode::kRecompute) {
    throw base::Error(
        "--preemption swap: the engine has no second KV-cache tier; preemption recomputes");
  }
  const int64_t positions = model_.config().max_positions;
  if (max_sequence_tokens() > positions) {
    throw base::Error(
        "--max-sequence-tokens " + std::to_string(max_sequence_tokens()) +
        (config.max_sequence_tokens == 0 ? " (--kv-blocks x --kv-block-tokens)" : "") +
        " exceeds model '" + model_.config().name + "''s max_positions " +
        std::to_string(positions) + ": give --max-sequence-tokens at most that");
  }
}

int64_t ServingCore::max_sequence_tokens() const {
  const scheduler::SchedulerConfig& c = scheduler_.config();
  return c.max_sequence_tokens > 0 ? c.max_sequence_tokens : c.kv_blocks * c.kv_block_tokens;
}

scheduler::AdmitResult ServingCore::Submit(const ServingRequest& request) {
  const int64_t vocab = model_.config().vocab_size;
  if (request.prompt.empty()) throw base::Error("prompt: at least one token expected");
  for (int32_t token : request.prompt) {
    if (token < 0 || token >= vocab) {
      throw base::Error("prompt: token id " + std::to_string(token) +
                        " outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  if (request.max_tokens < 1)
    throw base::Error("max_tokens: at least 1 expected, got " + std::to_string(request.max_tokens));
  if (sequences_.count(request.id)) throw base::Error(Id(request.id) + " submitted twice");
  scheduler::ScheduledRequest scheduled;
  scheduled.id = request.id;
  scheduled.arrival_s = request.arrival_s;
  scheduled.prompt_tokens = static_cast<int64_t>(request.prompt.size());
  scheduled.max_output_tokens = request.max_tokens;
  scheduled.priority = request.priority;
  scheduler::AdmitResult result = scheduler_.Submit(scheduled);
  if (result.refusal == scheduler::Refusal::kNone) {
    Sequence sequence;
    sequence.prompt = request.prompt;
    sequence.max_tokens = request.max_tokens;
    sequences_.emplace(request.id, std::move(sequence));
  }
  return result;
}

bool ServingCore::Cancel(int64_t request_id) {
  const bool known = scheduler_.Cancel(request_id);
  const auto found = sequences_.find(request_id);
  if (found != sequences_.end()) {
    ReleaseCaches(found->second);
    sequences_.erase(found);
  }
  return known;
}

void ServingCore::ReleaseCaches(Sequence& s) {
  if (s.cache) cache_pool_.Give(std::move(*s.cache));
  if (s.draft_cache) draft_cache_pool_.Give(std::move(*s.draft_cache));
  s.cache.reset();
  s.draft_cache.reset();
}

SequenceInput ServingCore::InputFor(const BatchEntry& entry, Sequence& s) {
  const int64_t id = entry.request_id;
  const int64_t known = static_cast<int64_t>(s.prompt.size() + s.generated.size());
  if (!s.cache) {
    Require(entry.prefill && entry.context_tokens == 0, id,
            "a sequence without a KV cache must start with a prefill at context 0");
    s.cache.emplace(cache_pool_.Take(model_, static_cast<int64_t>(s.prompt.size()) + s.max_tokens));
  }
  Require(s.cache->length() == entry.context_tokens, id,
          "context " + std::to_string(entry.context_tokens) + " but the KV cache holds " +
              std::to_string(s.cache->length()) + " positions");
  SequenceInput input{&*s.cache, {}};
  if (entry.prefill) {
    const int64_t end = entry.context_tokens + entry.tokens;
    Require(entry.tokens >= 1 && end <= known, id,
            "prefill chunk ends at " + std::to_string(end) + " of " + std::to_string(known) +
                " known tokens");
    Require(entry.emits_token == (end == known), id,
            "emits_token must mark exactly the chunk that reaches the last known token");
    for (int64_t p = entry.context_tokens; p < end; ++p) {
      const size_t prompt = s.prompt.size();
      input.tokens.push_back(static_cast<size_t>(p) < prompt ? s.prompt[p]
                                                             : s.generated[p - prompt]);
    }
  } else {
    const int64_t drafted = static_cast<int64_t>(s.drafts.size());
    Require(entry.tokens == (speculation_.draft ? drafted + 1 : 1) && !s.generated.empty() &&
                entry.context_tokens == known - 1,
            id,
            "a decode feeds the last generated token (and its drafts) at context prompt + "
            "generated - 1");
    input.tokens.push_back(s.generated.back());
    input.tokens.insert(input.tokens.end(), s.drafts.begin(), s.drafts.end());
    input.every_logit = speculation_.draft != nullptr;
  }
  return input;
}

void ServingCore::RunDrafts(const scheduler::IterationPlan& plan) {
  ForwardModel& draft = *speculation_.draft;
  std::vector<SequenceInput> inputs;
  std::vector<Sequence*> drafting;  // decodes with drafts to make, in batch order
  std::vector<size_t> rows;         // their logit rows in the next draft pass
  int64_t steps = 0;
  for (const BatchEntry& entry : plan.batch) {
    Sequence& s = sequences_.at(entry.request_id);
    s.drafts.clear();
    if (entry.prefill) {
      // The draft prefills the same chunk, so its cache follows the target's.
      if (!s.draft_cache) {
        s.draft_cache.emplace(draft_cache_pool_.Take(
            draft, static_cast<int64_t>(s.prompt.size()) + s.max_tokens + speculation_.gamma + 2));
      }
      Require(s.draft_cache->length() == entry.context_tokens, entry.request_id,
              "the draft's cache does not follow the target's");
      SequenceInput input = InputFor(entry, s);
      input.cache = &*s.draft_cache;
      inputs.push_back(std::move(input));
    } else if (entry.tokens > 1) {
      s.draft_length_before = s.draft_cache->length();
      rows.push_back(inputs.size());
      inputs.push_back({&*s.draft_cache, s.draft_pending});
      drafting.push_back(&s);
      steps = std::max(steps, entry.tokens - 1);
    } else {
      s.draft_pending.push_back(s.generated.back());  // no draft this time: the draft catches up
    }
  }
  const int64_t vocab = draft.config().vocab_size;
  std::vector<int64_t> wanted;  // drafts each drafting decode makes
  for (const BatchEntry& entry : plan.batch)
    if (!entry.prefill && entry.tokens > 1) wanted.push_back(entry.tokens - 1);
  for (int64_t step = 0; step < steps; ++step) {
    ForwardOptions options;
    options.logits = LogitRows::kLastPerSequence;
    options.step_kind = "draft";
    draft.Forward(inputs, options, draft_logits_);
    inputs.clear();
    std::vector<Sequence*> still;
    std::vector<int64_t> still_wanted;
    std::vector<size_t> still_rows;
    for (size_t i = 0; i < drafting.size(); ++i) {
      const float* row = draft_logits_.data() + static_cast<int64_t>(rows[i]) * vocab;
      drafting[i]->drafts.push_back(static_cast<int32_t>(kernels::ArgMax(row, vocab)));
      if (static_cast<int64_t>(drafting[i]->drafts.size()) >= wanted[i]) continue;
      still_rows.push_back(inputs.size());
      inputs.push_back({&*drafting[i]->draft_cache, {drafting[i]->drafts.back()}});
      still.push_back(drafting[i]);
      still_wanted.push_back(wanted[i]);
    }
    drafting = std::move(still);
    wanted = std::move(still_wanted);
    rows = std::move(still_rows);
  }
  // Without decodes to draft for, the prefill chunks still go through the draft.
  if (steps == 0 && !inputs.empty()) {
    ForwardOptions options;
    options.logits = LogitRows::kLastPerSequence;
    options.step_kind = "draft";
    draft.Forward(inputs, options, draft_logits_);
  }
}

TokenIds ServingCore::Verify(const BatchEntry& entry, Sequence& s, const float* rows) {
  const int64_t vocab = model_.config().vocab_size;
  const int64_t drafted = static_cast<int64_t>(s.drafts.size());
  auto target_token = [&](int64_t row) {
    return static_cast<int32_t>(kernels::ArgMax(rows + row * vocab, vocab));
  };
  int64_t accepted = 0;
  if (speculation_.fixed_rate) {
    accepted = speculation_.fixed_rate->Accepted(entry.request_id,
                                                 static_cast<int64_t>(s.generated.size()), drafted);
  } else {
    while (accepted < drafted && s.drafts[accepted] == target_token(accepted)) ++accepted;
  }
  TokenIds emitted(s.drafts.begin(), s.drafts.begin() + accepted);
  emitted.push_back(target_token(accepted));  // the correction, or the bonus token
  if (drafted == 0) return emitted;
  // The target keeps the fed token and the accepted drafts; the draft keeps its pending tokens and
  // the drafts it has processed among the accepted (the last draft is never fed to it).
  s.cache->Truncate(entry.context_tokens + 1 + accepted);
  s.draft_cache->Truncate(s.draft_length_before + static_cast<int64_t>(s.draft_pending.size()) +
                          std::min(accepted, drafted - 1));
  s.draft_pending =
      accepted == drafted ? TokenIds{s.drafts.back(), emitted.back()} : TokenIds{emitted.back()};
  return emitted;
}

IterationOutcome ServingCore::Step() {
  IterationOutcome outcome;
  outcome.plan = scheduler_.Plan();
  const scheduler::IterationPlan& plan = outcome.plan;
  for (int64_t id : plan.preempted) {  // recomputed later
    Sequence& s = sequences_.at(id);
    ReleaseCaches(s);
    s.draft_pending.clear();
  }
  if (plan.batch.empty()) {
    outcome.finished = scheduler_.Complete(plan);
    return outcome;
  }
  for (const BatchEntry& entry : plan.batch) {
    Require(sequences_.count(entry.request_id) != 0, entry.request_id,
            "not a request the engine holds");
  }
  if (speculation_.draft) RunDrafts(plan);
  std::vector<SequenceInput> inputs;
  inputs.reserve(plan.batch.size());
  for (const BatchEntry& entry : plan.batch)
    inputs.push_back(InputFor(entry, sequences_.at(entry.request_id)));
  ForwardOptions options;
  options.logits = speculation_.draft ? LogitRows::kLastOrEvery : LogitRows::kLastPerSequence;
  options.step_kind = "serve";
  options.routing = routing_;
  model_.Forward(inputs, options, logits_);
  const int64_t vocab = model_.config().vocab_size;
  std::vector<std::pair<int64_t, int64_t>> emitted_counts;
  int64_t row = 0;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    const BatchEntry& entry = plan.batch[i];
    const float* rows = logits_.data() + row * vocab;
    row += inputs[i].every_logit ? entry.tokens : 1;
    if (entry.prefill && !entry.emits_token) continue;
    Sequence& s = sequences_.at(entry.request_id);
    // Greedy: the first maximum, as RunDecode's PickToken at temperature 0.
    const TokenIds tokens = speculation_.draft && !entry.prefill
                                ? Verify(entry, s, rows)
                                : TokenIds{static_cast<int32_t>(kernels::ArgMax(rows, vocab))};
    if (speculation_.draft && entry.prefill) s.draft_pending = tokens;
    if (!entry.prefill)
      emitted_counts.emplace_back(entry.request_id, static_cast<int64_t>(tokens.size()));
    for (const int32_t token : tokens) {
      outcome.emitted.push_back(
          {entry.request_id, token, static_cast<int64_t>(s.generated.size())});
      s.generated.push_back(token);
    }
  }
  outcome.finished = scheduler_.Complete(plan, {}, emitted_counts);
  for (int64_t id : outcome.finished) {
    Sequence& s = sequences_.at(id);
    Require(static_cast<int64_t>(s.generated.size()) == s.max_tokens, id,
            "finished after " + std::to_string(s.generated.size()) + " of " +
                std::to_string(s.max_tokens) + " tokens");
    ReleaseCaches(s);
    sequences_.erase(id);
  }
  for (const EmittedToken& emitted : outcome.emitted) {
    const auto s = sequences_.find(emitted.request_id);
    if (s == sequences_.end()) continue;
    Require(scheduler_.GeneratedTokens(emitted.request_id) ==
                static_cast<int64_t>(s->second.generated.size()),
            emitted.request_id, "generated token counts differ");
  }
  return outcome;
}

}  // namespace moelab::executor
