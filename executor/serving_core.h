#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "executor/forward_model.h"
#include "executor/generation.h"
#include "executor/kv_cache_pool.h"
#include "scheduler/scheduler.h"
#include "scheduler/speculative_acceptance.h"

namespace moelab::executor {

// One completion request as the engine runs it: token ids, not text.
struct ServingRequest {
  int64_t id = 0;
  TokenIds prompt;
  int64_t max_tokens = 0;  // generated tokens; synthetic weights have no end token, so exactly this
  int64_t priority = 0;    // scheduler::QueueOrder::kPriority: higher first
  double arrival_s = 0;    // for the scheduler's FCFS ties and reports only
};

struct EmittedToken {
  int64_t request_id = 0;
  int32_t token = 0;
  int64_t index = 0;  // 0 for the request's first generated token
};

// Speculative decoding inside serving (fixed gamma per iteration): every decode of d = gamma + 1
// positions (fewer near max_tokens) runs d - 1 batched draft steps, then its d positions are
// verified in the iteration's one target pass beside the prefill chunks, and it emits accepted + 1
// tokens. Acceptance: greedy against the target's argmax (outputs equal plain greedy serving, as
// the executor's greedy SD's do), or, with `fixed_rate` (--alpha, synthetic weights), the seeded
// coins of scheduler::SpeculativeAcceptance (the executor's alpha-coin rule: the draft's tokens are
// kept, so outputs differ from greedy; the serving simulator draws the same coins).
struct ServingSpeculation {
  ForwardModel* draft = nullptr;  // null: no speculative decoding
  int64_t gamma = 0;
  std::optional<scheduler::SpeculativeAcceptance> fixed_rate;
};

// What one iteration did: the scheduler's plan, the tokens it produced (batch order), the
// requests that reached their max_tokens (their sequences are gone).
struct IterationOutcome {
  scheduler::IterationPlan plan;
  std::vector<EmittedToken> emitted;
  std::vector<int64_t> finished;
};

// The single-threaded heart of the serving engine: a Scheduler deciding, a ForwardModel running
// each iteration's mixed batch (prefill chunks and decodes) in one pass, greedy tokens. One KV
// cache per running sequence, of prompt + max_tokens positions; a preempted sequence's cache is
// dropped and rebuilt by recomputing its prompt and generated tokens, which gives bit-identical
// tokens because the executor's per-token results do not depend on the batch a token runs in or
// on how its sequence's positions were split over passes (transformer.h; tests/executor).
//
// Every plan is checked against the engine's own record (a cache's length equals the entry's
// context, a completing prefill ends at prompt + generated tokens, a decode feeds the last
// generated token); a disagreement is a base::Error, never a silently wrong token.
class ServingCore {
 public:
  // Refuses what the engine cannot run: decode_tokens_per_step other than 1 without SD or other
  // than gamma + 1 with it, a draft of another vocabulary, swap preemption (the CPU engine has no
  // second KV tier), a sequence limit beyond the model's max_positions (naming
  // --max-sequence-tokens).
  ServingCore(ForwardModel& model, scheduler::SchedulerConfig config,
              ServingSpeculation speculation = {});

  // Checks the request (a non-empty prompt of ids inside the vocabulary, max_tokens >= 1: a
  // base::Error naming "prompt" or "max_tokens") and hands it to the scheduler, whose refusal
  // (too long, queue full) comes back in the result.
  scheduler::AdmitResult Submit(const ServingRequest& request);
  // Drops a waiting or running request and frees its cache; false when unknown or finished.
  bool Cancel(int64_t request_id);
  // One iteration: Plan, one Forward over the batch, greedy tokens, Complete.
  IterationOutcome Step();
  // The target's passes route their tokens by `routing` (step = the model's pass count, the
  // tokens in batch order) instead of the model's gate: the serving simulator's offload engine
  // routes the same source the same way, so the two can be compared decision by decision. Held,
  // not owned; nullptr: the gate.
  void RouteBy(routing::RoutingSource* routing) { routing_ = routing; }

  bool Idle() const { return scheduler_.Idle(); }
  scheduler::SchedulerState State() const { return scheduler_.State(); }
  const scheduler::SchedulerConfig& config() const { return scheduler_.config(); }
  const ForwardModel& model() const { return model_; }
  // The effective prompt + output limit: max_sequence_tokens, or the KV budget's tokens when 0.
  int64_t max_sequence_tokens() const;

 private:
  struct Sequence {
    TokenIds prompt;
    int64_t max_tokens = 0;
    TokenIds generated;
    std::optional<KvCache> cache;  // absent while waiting or preempted
    // SD: the draft's cache (beside `cache`), its tokens emitted but not yet in it, this
    // iteration's drafts and the draft cache's length before them.
    std::optional<KvCache> draft_cache;
    TokenIds draft_pending, drafts;
    int64_t draft_length_before = 0;
  };
  SequenceInput InputFor(const scheduler::BatchEntry& entry, Sequence& sequence);
  // SD: the draft's passes of this iteration (its share of the prefill chunks with the decodes'
  // first step, then one step per further draft), leaving each decode's drafts in `drafts`.
  void RunDrafts(const scheduler::IterationPlan& plan);
  // SD: one decode's verified rows -> its emitted tokens; rolls both caches back.
  TokenIds Verify(const scheduler::BatchEntry& entry, Sequence& s, const float* rows);

  // A sequence's caches back to the pools (finished, cancelled or preempted).
  void ReleaseCaches(Sequence& s);

  ForwardModel& model_;
  routing::RoutingSource* routing_ = nullptr;
  scheduler::Scheduler scheduler_;
  KvCachePool cache_pool_, draft_cache_pool_;  // by the scheduler's running sequences
  std::map<int64_t, Sequence> sequences_;
  std::vector<float> logits_;
  ServingSpeculation speculation_;
  std::vector<float> draft_logits_;
};

}  // namespace moelab::executor
