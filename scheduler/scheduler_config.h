#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace moelab::scheduler {

// Bounds on the settings (docs/limits.md): far beyond any engine's, small enough that block and
// token counts never overflow and a simulation's state stays in memory.
inline constexpr int64_t kMaxKvBlocks = int64_t{1} << 32;
inline constexpr int64_t kMaxKvBlockTokens = 65536;
inline constexpr int64_t kMaxRunningSequences = 1 << 20;
inline constexpr int64_t kMaxBatchedTokens = int64_t{1} << 30;
inline constexpr int64_t kMaxWaitingRequests = int64_t{1} << 30;
inline constexpr int64_t kMaxSequenceTokens = int64_t{1} << 40;
inline constexpr int64_t kMaxDecodeTokensPerStep = 64;

// How requests are queued when they wait: first come first served, or by `priority` (higher
// first, FCFS among equals).
enum class QueueOrder { kFcfs, kPriority };

// What a preempted sequence loses: its KV blocks are freed and its prompt plus the tokens it has
// generated are prefilled again later (recompute), or its blocks go to a second memory tier and
// come back unchanged (swap; only where the engine has one).
enum class PreemptionMode { kRecompute, kSwap };

// Every setting of a serving scheduler, as data: the same struct drives the executor's engine
// (moelab serve) and the serving simulator (moelab sim serve), and every report prints it
// (ToJson). Defaults are vLLM's where it has one.
struct SchedulerConfig {
  int64_t kv_block_tokens = 16;        // tokens per KV-cache block
  int64_t kv_blocks = 0;               // blocks in the budget (0: not set; Validate refuses it)
  int64_t max_running_sequences = 64;  // sequences in one iteration at most
  // Tokens one iteration processes at most (decodes count 1 each, or gamma + 1 with SD); a
  // prefill is cut into chunks that fit what the decodes leave (Sarathi-style chunked prefill).
  int64_t max_batched_tokens = 2048;
  // A prefill chunk's tokens at most (0: up to max_batched_tokens).
  int64_t prefill_chunk_tokens = 0;
  int64_t max_waiting_requests = 1024;  // the queue's bound: an arrival beyond it is refused
  int64_t max_sequence_tokens = 0;      // prompt + output at most (0: kv_blocks * kv_block_tokens)
  // Tokens a running sequence's decode step adds (1; gamma + 1 positions verified with SD, of
  // which the engine keeps the accepted ones).
  int64_t decode_tokens_per_step = 1;
  QueueOrder order = QueueOrder::kFcfs;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  // kSwap only: KV blocks the host tier holds for swapped-out sequences (--host-kv-blocks); a
  // preemption that finds it full recomputes instead.
  int64_t host_kv_blocks = 0;

  // The options a command sets the settings by, where they are not serve's and sim serve's
  // (plan capacity tries --max-batch and --chunk lists).
  struct OptionNames {
    const char* max_running = "--max-running";
    const char* prefill_chunk = "--prefill-chunk";
  };
  // Errors name the option (--kv-blocks, --max-running, --max-batched-tokens, --prefill-chunk,
  // --max-waiting, --max-sequence-tokens) and the expected range. Every iteration must fit a decode
  // of each running sequence: max_batched_tokens >= max_running_sequences x decode_tokens_per_step.
  void Validate(const OptionNames& names) const;
  void Validate() const { Validate(OptionNames{}); }
  // A --max-sequence-tokens the KV budget (kv_blocks x kv_block_tokens, once known) cannot hold
  // is refused, as vLLM refuses such a max_model_len: no request could ever be served at it, yet
  // the server would advertise it. 0 (the budget's own) passes.
  void CheckSequenceFitsBudget() const;
  nlohmann::json ToJson() const;
};

std::string QueueOrderName(QueueOrder order);                 // "fcfs", "priority"
std::string PreemptionModeName(PreemptionMode mode);          // "recompute", "swap"
QueueOrder ParseQueueOrder(const std::string& text);          // error names --queue-order
PreemptionMode ParsePreemptionMode(const std::string& text);  // error names --preemption

}  // namespace moelab::scheduler
