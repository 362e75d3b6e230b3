#include "executor/serving_core.h"

#include <string>

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

ServingCore::ServingCore(ForwardModel& model, scheduler::SchedulerConfig config)
    : model_(model), scheduler_((config.Validate(), config)) {
  if (config.decode_tokens_per_step != 1) {
    throw base::Error("the serving engine decodes one token per step (decode_tokens_per_step " +
                      std::to_string(config.decode_tokens_per_step) +
                      "): speculative decoding is not composed with serving");
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
  if (result.refusal == scheduler::Refusal::kNone)
    sequences_.emplace(request.id, Sequence{request.prompt, request.max_tokens, {}, std::nullopt});
  return result;
}

bool ServingCore::Cancel(int64_t request_id) {
  const bool known = scheduler_.Cancel(request_id);
  sequences_.erase(request_id);
  return known;
}

SequenceInput ServingCore::InputFor(const BatchEntry& entry, Sequence& s) {
  const int64_t id = entry.request_id;
  const int64_t known = static_cast<int64_t>(s.prompt.size() + s.generated.size());
  if (!s.cache) {
    Require(entry.prefill && entry.context_tokens == 0, id,
            "a sequence without a KV cache must start with a prefill at context 0");
    s.cache.emplace(model_.NewCache(static_cast<int64_t>(s.prompt.size()) + s.max_tokens));
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
    Require(entry.tokens == 1 && !s.generated.empty() && entry.context_tokens == known - 1, id,
            "a decode feeds the last generated token at context prompt + generated - 1");
    input.tokens.push_back(s.generated.back());
  }
  return input;
}

IterationOutcome ServingCore::Step() {
  IterationOutcome outcome;
  outcome.plan = scheduler_.Plan();
  const scheduler::IterationPlan& plan = outcome.plan;
  for (int64_t id : plan.preempted) sequences_.at(id).cache.reset();  // recomputed later
  if (plan.batch.empty()) {
    outcome.finished = scheduler_.Complete(plan);
    return outcome;
  }
  std::vector<SequenceInput> inputs;
  inputs.reserve(plan.batch.size());
  for (const BatchEntry& entry : plan.batch) {
    const auto found = sequences_.find(entry.request_id);
    Require(found != sequences_.end(), entry.request_id, "not a request the engine holds");
    inputs.push_back(InputFor(entry, found->second));
  }
  ForwardOptions options;
  options.logits = LogitRows::kLastPerSequence;
  options.step_kind = "serve";
  model_.Forward(inputs, options, logits_);
  const int64_t vocab = model_.config().vocab_size;
  for (size_t i = 0; i < plan.batch.size(); ++i) {
    const BatchEntry& entry = plan.batch[i];
    if (entry.prefill && !entry.emits_token) continue;
    Sequence& s = sequences_.at(entry.request_id);
    // Greedy: the first maximum, as RunDecode's PickToken at temperature 0.
    const auto token = static_cast<int32_t>(
        kernels::ArgMax(logits_.data() + static_cast<int64_t>(i) * vocab, vocab));
    outcome.emitted.push_back({entry.request_id, token, static_cast<int64_t>(s.generated.size())});
    s.generated.push_back(token);
  }
  outcome.finished = scheduler_.Complete(plan);
  for (int64_t id : outcome.finished) {
    const Sequence& s = sequences_.at(id);
    Require(static_cast<int64_t>(s.generated.size()) == s.max_tokens, id,
            "finished after " + std::to_string(s.generated.size()) + " of " +
                std::to_string(s.max_tokens) + " tokens");
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
