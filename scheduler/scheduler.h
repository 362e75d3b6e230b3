#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/scheduler_config.h"

namespace moelab::scheduler {

// One request as the scheduler sees it: lengths in tokens, no text. `max_output_tokens` is what
// the request may generate; the engine says when it finished earlier (FinishedEarly).
struct ScheduledRequest {
  int64_t id = 0;
  double arrival_s = 0;  // for reports and FCFS ties only: decisions never read a clock
  int64_t prompt_tokens = 0;
  int64_t max_output_tokens = 0;
  int64_t priority = 0;  // QueueOrder::kPriority: higher first
};

// Why an arrival was refused: too long for the model or the KV budget, or the queue is full.
enum class Refusal { kNone, kTooLong, kQueueFull };

struct AdmitResult {
  Refusal refusal = Refusal::kNone;
  std::string message;  // the limit, in words: "prompt + max_tokens = 5000 > 4096 tokens (...)"
};

// One sequence's share of an iteration.
struct BatchEntry {
  int64_t request_id = 0;
  bool prefill = false;        // a prefill chunk (prompt, or recomputation after preemption)
  int64_t tokens = 0;          // new tokens this iteration (chunk size, or decode_tokens_per_step)
  int64_t context_tokens = 0;  // tokens already in the sequence's KV cache before this iteration
  // True when this chunk completes the prefill: the iteration yields the sequence's next token.
  bool emits_token = false;
  bool operator==(const BatchEntry&) const = default;
};

// What one iteration does: the batch in the order the engine runs it (decodes first, then
// prefill chunks, each group in queue order), and what the scheduler decided before it.
struct IterationPlan {
  int64_t iteration = 0;
  std::vector<BatchEntry> batch;   // empty when nothing can run
  std::vector<int64_t> preempted;  // running sequences preempted to make room (newest first)
  std::vector<int64_t> admitted;   // waiting requests that started running this iteration
  int64_t kv_blocks_used = 0;      // after this iteration's allocations
  // PreemptionMode::kSwap only: preempted sequences whose blocks went to the host tier (a subset
  // of `preempted`), and swapped sequences brought back (they decode in this iteration).
  std::vector<int64_t> swapped_out;
  std::vector<int64_t> swapped_in;
  int64_t waiting = 0;  // requests left waiting after this iteration's admissions
  int64_t batched_tokens() const;
  bool operator==(const IterationPlan&) const = default;
};

// Counters for /metrics and reports.
struct SchedulerState {
  int64_t waiting = 0, running = 0, swapped = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t preemptions = 0;  // since construction
  int64_t finished = 0;
};

// Iteration-level (continuous) batching over a paged KV budget (vLLM's scheduler, Sarathi's chunked
// prefill): the one decision maker of the executor's serving engine and of the serving simulator,
// so both take the same decisions on the same arrivals (tests/scheduler). Deterministic: no clock,
// no randomness; decisions depend only on the sequence of calls.
//
// Use: Submit arrivals; each iteration Plan(), run the batch, then Complete(plan, finished) with
// the requests that finished in it (a request finishes by itself when it reaches
// max_output_tokens; `finished_early` lists those that stopped before, e.g. on an end token);
// Cancel a request whose client went away.
class Scheduler {
 public:
  explicit Scheduler(SchedulerConfig config);

  const SchedulerConfig& config() const { return config_; }

  // Queues a request, or refuses it (too long for the limits, or the queue is full) with the limit
  // in the message. Ids must be unique (an Error otherwise).
  AdmitResult Submit(const ScheduledRequest& request);

  // The next iteration: admits waiting requests while KV blocks, max_running_sequences and the
  // token budget allow, preempts the newest running sequences when a decode needs a block that is
  // not free, and cuts prefills into chunks.
  IterationPlan Plan();

  // Records that `plan` ran: the decodes and the completing prefill chunks each emitted a token
  // (a decode its entry's `tokens` or, with SD, `emitted_tokens` per request when given: the
  // accepted drafts + 1; the blocks beyond context + emitted positions are freed); requests that
  // reached max_output_tokens, or are listed in `finished_early`, leave and free their blocks.
  // Returns the ids that finished in this iteration, in batch order.
  std::vector<int64_t> Complete(
      const IterationPlan& plan, const std::vector<int64_t>& finished_early = {},
      const std::vector<std::pair<int64_t, int64_t>>& emitted_tokens = {});

  // Drops a waiting or running request (client disconnect) and frees its blocks; false when the
  // id is unknown or already finished.
  bool Cancel(int64_t request_id);

  // Tokens a request has generated so far (0 for one still waiting); nullopt when unknown.
  std::optional<int64_t> GeneratedTokens(int64_t request_id) const;

  bool Idle() const;  // nothing waiting or running
  SchedulerState State() const;

 private:
  // One request's state. Its KV cache holds `prefilled` tokens while it prefills; once decoding it
  // holds prompt + generated - 1 (the last generated token is the next decode's input).
  struct Sequence {
    ScheduledRequest request;
    int64_t submitted = 0;       // submission number: FCFS order, and ties among priorities
    int64_t prefill_target = 0;  // prompt + generated at admission (recompute re-prefills both)
    int64_t prefilled = 0;       // of prefill_target, computed so far
    int64_t generated = 0;
    int64_t blocks = 0;   // KV blocks held (on the device, or on the host while swapped)
    int64_t started = 0;  // admission number: "newest running" for preemption
    enum class Where { kWaiting, kRunning, kSwapped } where = Where::kWaiting;
    bool decoding() const { return prefilled == prefill_target && generated > 0; }
  };

  void Enqueue(int64_t id, bool at_head_of_its_class);
  // Takes `id` off the device to make room: swapped to the host tier when configured and it has
  // room, otherwise recompute (blocks freed, back to the waiting queue's head).
  void Preempt(int64_t id, IterationPlan& plan);
  void PlanDecodes(IterationPlan& plan, int64_t& budget_tokens, bool& preempted_any);
  void PlanSwapIns(IterationPlan& plan, int64_t& budget_tokens);
  void PlanPrefills(IterationPlan& plan, int64_t& budget_tokens, bool admit);
  void InsertRunning(int64_t id);  // at its place in the running order, as the newest of its class
  int64_t BlocksFor(int64_t tokens) const;
  void Finish(int64_t id);

  SchedulerConfig config_;
  std::unordered_map<int64_t, Sequence> sequences_;  // waiting, running and swapped, by id
  std::deque<int64_t> waiting_;                      // queue order (FCFS, or priority then FCFS)
  std::vector<int64_t> running_;  // running order: admission (priority first under kPriority)
  std::vector<int64_t> swapped_;  // oldest preempted first
  int64_t free_blocks_ = 0;
  int64_t host_blocks_used_ = 0;
  int64_t next_submitted_ = 0, next_started_ = 0, next_iteration_ = 0;
  int64_t preemptions_ = 0, finished_ = 0;
  bool plan_outstanding_ = false;  // Plan() returned a plan that Complete() has not seen
};

}  // namespace moelab::scheduler
