#include "scheduler/scheduler.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "base/error.h"

namespace moelab::scheduler {

int64_t IterationPlan::batched_tokens() const {
  int64_t tokens = 0;
  for (const BatchEntry& entry : batch) tokens += entry.tokens;
  return tokens;
}

Scheduler::Scheduler(SchedulerConfig config) : config_(std::move(config)) {
  config_.Validate();
  free_blocks_ = config_.kv_blocks;
}

int64_t Scheduler::BlocksFor(int64_t tokens) const {
  return (tokens + config_.kv_block_tokens - 1) / config_.kv_block_tokens;
}

AdmitResult Scheduler::Submit(const ScheduledRequest& request) {
  const std::string name = "request " + std::to_string(request.id);
  if (request.prompt_tokens < 1 || request.prompt_tokens > kMaxSequenceTokens) {
    throw base::Error(name + ": prompt_tokens " + std::to_string(request.prompt_tokens) +
                      ": expected 1 to 2^40");
  }
  if (request.max_output_tokens < 1 || request.max_output_tokens > kMaxSequenceTokens) {
    throw base::Error(name + ": max_output_tokens " + std::to_string(request.max_output_tokens) +
                      ": expected 1 to 2^40");
  }
  if (sequences_.count(request.id) != 0) {
    throw base::Error(name + ": the id is already queued or running (ids must be unique)");
  }
  const int64_t total = request.prompt_tokens + request.max_output_tokens;
  const std::string sum = "prompt + max_tokens = " + std::to_string(request.prompt_tokens) + " + " +
                          std::to_string(request.max_output_tokens) + " = " + std::to_string(total);
  if (config_.max_sequence_tokens > 0 && total > config_.max_sequence_tokens) {
    return {Refusal::kTooLong, sum + " > " + std::to_string(config_.max_sequence_tokens) +
                                   " tokens (--max-sequence-tokens)"};
  }
  if (BlocksFor(total) > config_.kv_blocks) {
    return {Refusal::kTooLong, sum + " tokens need " + std::to_string(BlocksFor(total)) +
                                   " KV blocks of " + std::to_string(config_.kv_block_tokens) +
                                   " tokens > the budget of " + std::to_string(config_.kv_blocks) +
                                   " blocks (--kv-blocks)"};
  }
  if (static_cast<int64_t>(waiting_.size()) >= config_.max_waiting_requests) {
    return {Refusal::kQueueFull, "queue full: " + std::to_string(waiting_.size()) +
                                     " requests waiting (--max-waiting " +
                                     std::to_string(config_.max_waiting_requests) + ")"};
  }
  Sequence sequence;
  sequence.request = request;
  sequence.submitted = next_submitted_++;
  sequence.prefill_target = request.prompt_tokens;
  sequences_.emplace(request.id, sequence);
  Enqueue(request.id, false);
  return {};
}

void Scheduler::Enqueue(int64_t id, bool at_head_of_its_class) {
  Sequence& sequence = sequences_.at(id);
  sequence.where = Sequence::Where::kWaiting;
  if (config_.order == QueueOrder::kFcfs) {
    if (at_head_of_its_class) {
      waiting_.push_front(id);
    } else {
      waiting_.push_back(id);
    }
    return;
  }
  // Priority: higher first; a new arrival goes behind its equals, a preempted one before them.
  const int64_t priority = sequence.request.priority;
  auto place = std::find_if(waiting_.begin(), waiting_.end(), [&](int64_t other) {
    const int64_t other_priority = sequences_.at(other).request.priority;
    return at_head_of_its_class ? other_priority <= priority : other_priority < priority;
  });
  waiting_.insert(place, id);
}

void Scheduler::InsertRunning(int64_t id) {
  Sequence& sequence = sequences_.at(id);
  sequence.where = Sequence::Where::kRunning;
  sequence.started = next_started_++;
  if (config_.order == QueueOrder::kFcfs) {
    running_.push_back(id);
    return;
  }
  const int64_t priority = sequence.request.priority;
  auto place = std::find_if(running_.begin(), running_.end(), [&](int64_t other) {
    return sequences_.at(other).request.priority < priority;
  });
  running_.insert(place, id);
}

void Scheduler::Preempt(int64_t id, IterationPlan& plan) {
  Sequence& sequence = sequences_.at(id);
  ++preemptions_;
  plan.preempted.push_back(id);
  free_blocks_ += sequence.blocks;
  if (config_.preemption == PreemptionMode::kSwap &&
      config_.host_kv_blocks - host_blocks_used_ >= sequence.blocks) {
    host_blocks_used_ += sequence.blocks;
    sequence.where = Sequence::Where::kSwapped;
    swapped_.push_back(id);
    plan.swapped_out.push_back(id);
    return;
  }
  // Recompute: the KV is dropped; the prompt and every token generated so far are prefilled again,
  // so what the request has produced is kept and its next token follows them.
  sequence.blocks = 0;
  sequence.prefill_target = sequence.request.prompt_tokens + sequence.generated;
  sequence.prefilled = 0;
  Enqueue(id, true);
}

// Decodes go first, oldest in the running order first. A decode that needs a block none has
// preempts the newest running sequence (vLLM's victim), itself when it is the newest; victims are
// always the running order's tail, which has not been scheduled in this iteration yet.
void Scheduler::PlanDecodes(IterationPlan& plan, int64_t& budget_tokens, bool& preempted_any) {
  size_t end = running_.size();
  for (size_t i = 0; i < end; ++i) {
    const int64_t id = running_[i];
    Sequence& sequence = sequences_.at(id);
    if (!sequence.decoding()) continue;
    const int64_t tokens = std::min(config_.decode_tokens_per_step,
                                    sequence.request.max_output_tokens - sequence.generated);
    const int64_t context = sequence.request.prompt_tokens + sequence.generated - 1;
    const int64_t need = std::max<int64_t>(0, BlocksFor(context + tokens) - sequence.blocks);
    bool preempted_self = false;
    while (need > free_blocks_) {
      const int64_t victim = running_[--end];
      Preempt(victim, plan);
      preempted_any = true;
      if (victim == id) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    sequence.blocks += need;
    free_blocks_ -= need;
    plan.batch.push_back({id, false, tokens, context, true});
    budget_tokens -= tokens;
  }
  running_.resize(end);
}

// Swapped sequences come back before any waiting request is admitted (oldest preempted first),
// each with its blocks and, when it was decoding, its decode in this iteration.
void Scheduler::PlanSwapIns(IterationPlan& plan, int64_t& budget_tokens) {
  while (!swapped_.empty()) {
    const int64_t id = swapped_.front();
    Sequence& sequence = sequences_.at(id);
    const bool decoding = sequence.decoding();
    const int64_t tokens = decoding
                               ? std::min(config_.decode_tokens_per_step,
                                          sequence.request.max_output_tokens - sequence.generated)
                               : 0;
    const int64_t context = sequence.request.prompt_tokens + sequence.generated - 1;
    const int64_t growth =
        decoding ? std::max<int64_t>(0, BlocksFor(context + tokens) - sequence.blocks) : 0;
    if (static_cast<int64_t>(running_.size()) >= config_.max_running_sequences ||
        sequence.blocks + growth > free_blocks_ || tokens > budget_tokens) {
      return;
    }
    swapped_.erase(swapped_.begin());
    host_blocks_used_ -= sequence.blocks;
    free_blocks_ -= sequence.blocks + growth;
    sequence.blocks += growth;
    InsertRunning(id);
    plan.swapped_in.push_back(id);
    if (decoding) {
      plan.batch.push_back({id, false, tokens, context, true});
      budget_tokens -= tokens;
    }
  }
}

// Prefill chunks fill what the decodes left of the token budget: first the running sequences still
// prefilling (running order), then admissions in queue order while a running slot, the blocks of
// the prefill plus its first output token, and a token of budget remain. Admission stops at the
// first request that does not fit (no overtaking: FCFS holds).
void Scheduler::PlanPrefills(IterationPlan& plan, int64_t& budget_tokens, bool admit) {
  const int64_t chunk_cap =
      config_.prefill_chunk_tokens > 0 ? config_.prefill_chunk_tokens : config_.max_batched_tokens;
  auto add_chunk = [&](int64_t id, Sequence& sequence) {
    const int64_t remaining = sequence.prefill_target - sequence.prefilled;
    const int64_t chunk = std::min({remaining, budget_tokens, chunk_cap});
    plan.batch.push_back({id, true, chunk, sequence.prefilled, chunk == remaining});
    budget_tokens -= chunk;
  };
  for (const int64_t id : running_) {
    if (budget_tokens == 0) return;
    Sequence& sequence = sequences_.at(id);
    if (sequence.prefilled < sequence.prefill_target) add_chunk(id, sequence);
  }
  if (!admit) return;
  while (!waiting_.empty() && budget_tokens > 0 &&
         static_cast<int64_t>(running_.size()) < config_.max_running_sequences) {
    const int64_t id = waiting_.front();
    Sequence& sequence = sequences_.at(id);
    const int64_t need = BlocksFor(sequence.prefill_target + 1);
    if (need > free_blocks_) return;
    waiting_.pop_front();
    sequence.blocks = need;
    free_blocks_ -= need;
    InsertRunning(id);
    plan.admitted.push_back(id);
    add_chunk(id, sequence);
  }
}

IterationPlan Scheduler::Plan() {
  if (plan_outstanding_) {
    throw base::Error("scheduler: Plan() called again before Complete() of iteration " +
                      std::to_string(next_iteration_ - 1));
  }
  IterationPlan plan;
  plan.iteration = next_iteration_++;
  int64_t budget_tokens = config_.max_batched_tokens;
  bool preempted_any = false;
  PlanDecodes(plan, budget_tokens, preempted_any);
  // After a preemption nothing new starts in the same iteration (vLLM's rule): admitting would
  // take the blocks just freed for the sequences that still run.
  if (!preempted_any) PlanSwapIns(plan, budget_tokens);
  PlanPrefills(plan, budget_tokens, !preempted_any && swapped_.empty());
  plan.kv_blocks_used = config_.kv_blocks - free_blocks_;
  plan.waiting = static_cast<int64_t>(waiting_.size());
  plan_outstanding_ = !plan.batch.empty();
  return plan;
}

std::vector<int64_t> Scheduler::Complete(
    const IterationPlan& plan, const std::vector<int64_t>& finished_early,
    const std::vector<std::pair<int64_t, int64_t>>& emitted_tokens) {
  if (plan.batch.empty()) return {};
  if (!plan_outstanding_ || plan.iteration != next_iteration_ - 1) {
    throw base::Error("scheduler: Complete() of iteration " + std::to_string(plan.iteration) +
                      ", which is not the plan outstanding");
  }
  plan_outstanding_ = false;
  std::unordered_set<int64_t> stop(finished_early.begin(), finished_early.end());
  std::vector<int64_t> finished;
  for (const BatchEntry& entry : plan.batch) {
    auto found = sequences_.find(entry.request_id);
    // A request cancelled while its iteration ran has left already.
    if (found == sequences_.end() || found->second.where != Sequence::Where::kRunning) continue;
    Sequence& sequence = found->second;
    if (entry.prefill) {
      sequence.prefilled += entry.tokens;
      if (entry.emits_token) sequence.generated += 1;
    } else {
      int64_t emitted = entry.tokens;
      for (const auto& [id, count] : emitted_tokens) {
        if (id != entry.request_id) continue;
        if (count < 1 || count > entry.tokens) {
          throw base::Error("scheduler: request " + std::to_string(id) + " emitted " +
                            std::to_string(count) + " tokens in a decode of " +
                            std::to_string(entry.tokens) + " (expected 1 to " +
                            std::to_string(entry.tokens) + ")");
        }
        emitted = count;
      }
      sequence.generated += emitted;
      // With SD the verify reserved blocks for every checked position; the cache keeps the fed
      // token and the accepted drafts (context + emitted positions): the blocks past them go back.
      const int64_t kept = BlocksFor(entry.context_tokens + emitted);
      if (emitted < entry.tokens && sequence.blocks > kept) {
        free_blocks_ += sequence.blocks - kept;
        sequence.blocks = kept;
      }
    }
    if (sequence.generated >= sequence.request.max_output_tokens || stop.count(entry.request_id)) {
      finished.push_back(entry.request_id);
    }
  }
  for (const int64_t id : finished) Finish(id);
  return finished;
}

void Scheduler::Finish(int64_t id) {
  free_blocks_ += sequences_.at(id).blocks;
  running_.erase(std::find(running_.begin(), running_.end(), id));
  sequences_.erase(id);
  ++finished_;
}

bool Scheduler::Cancel(int64_t request_id) {
  auto found = sequences_.find(request_id);
  if (found == sequences_.end()) return false;
  Sequence& sequence = found->second;
  switch (sequence.where) {
    case Sequence::Where::kWaiting:
      waiting_.erase(std::find(waiting_.begin(), waiting_.end(), request_id));
      break;
    case Sequence::Where::kRunning:
      free_blocks_ += sequence.blocks;
      running_.erase(std::find(running_.begin(), running_.end(), request_id));
      break;
    case Sequence::Where::kSwapped:
      host_blocks_used_ -= sequence.blocks;
      swapped_.erase(std::find(swapped_.begin(), swapped_.end(), request_id));
      break;
  }
  sequences_.erase(found);
  return true;
}

std::optional<int64_t> Scheduler::GeneratedTokens(int64_t request_id) const {
  auto found = sequences_.find(request_id);
  if (found == sequences_.end()) return std::nullopt;
  return found->second.generated;
}

bool Scheduler::Idle() const { return waiting_.empty() && running_.empty() && swapped_.empty(); }

SchedulerState Scheduler::State() const {
  SchedulerState state;
  state.waiting = static_cast<int64_t>(waiting_.size());
  state.running = static_cast<int64_t>(running_.size());
  state.swapped = static_cast<int64_t>(swapped_.size());
  state.kv_blocks_used = config_.kv_blocks - free_blocks_;
  state.kv_blocks_total = config_.kv_blocks;
  state.preemptions = preemptions_;
  state.finished = finished_;
  return state;
}

}  // namespace moelab::scheduler
