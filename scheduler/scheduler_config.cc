#include "scheduler/scheduler_config.h"

#include "base/error.h"
#include "base/limits.h"

namespace moelab::scheduler {

void SchedulerConfig::Validate(const OptionNames& names) const {
  base::CheckCount(kv_block_tokens, 1, kMaxKvBlockTokens, "--kv-block-tokens",
                   "tokens per KV block; engines use 8 to 256");
  if (kv_blocks == 0) {
    throw base::Error("--kv-blocks: not set (the KV-cache budget in blocks of " +
                      std::to_string(kv_block_tokens) + " tokens; expected at least 1)");
  }
  base::CheckCount(kv_blocks, 1, kMaxKvBlocks, "--kv-blocks", "2^32 blocks");
  base::CheckCount(max_running_sequences, 1, kMaxRunningSequences, names.max_running,
                   "sequences in one iteration");
  base::CheckCount(decode_tokens_per_step, 1, kMaxDecodeTokensPerStep, "decode tokens per step",
                   "gamma + 1 with speculative decoding");
  base::CheckCount(max_batched_tokens, 1, kMaxBatchedTokens, "--max-batched-tokens",
                   "tokens in one iteration");
  if (max_batched_tokens < max_running_sequences * decode_tokens_per_step) {
    throw base::Error("--max-batched-tokens " + std::to_string(max_batched_tokens) +
                      ": must be at least " + names.max_running +
                      " x decode tokens per step = " + std::to_string(max_running_sequences) +
                      " x " + std::to_string(decode_tokens_per_step) +
                      " (every running sequence's decode must fit one iteration)");
  }
  base::CheckCount(prefill_chunk_tokens, 0, max_batched_tokens, names.prefill_chunk,
                   "a chunk is part of one iteration's --max-batched-tokens");
  base::CheckCount(max_waiting_requests, 1, kMaxWaitingRequests, "--max-waiting",
                   "the queue's bound");
  base::CheckCount(max_sequence_tokens, 0, kMaxSequenceTokens, "--max-sequence-tokens",
                   "prompt + output tokens; 0 means the KV budget");
  if (preemption == PreemptionMode::kSwap) {
    base::CheckCount(host_kv_blocks, 1, kMaxKvBlocks, "--host-kv-blocks",
                     "swap needs a host tier; 2^32 blocks at most");
  } else if (host_kv_blocks != 0) {
    throw base::Error("--host-kv-blocks " + std::to_string(host_kv_blocks) +
                      ": only with --preemption swap (recompute keeps nothing on the host)");
  }
}

void SchedulerConfig::CheckSequenceFitsBudget() const {
  const int64_t budget_tokens = kv_blocks * kv_block_tokens;
  if (max_sequence_tokens > budget_tokens) {
    throw base::Error("--max-sequence-tokens " + std::to_string(max_sequence_tokens) +
                      " exceeds the KV budget's " + std::to_string(budget_tokens) +
                      " tokens (--kv-blocks " + std::to_string(kv_blocks) +
                      " x --kv-block-tokens " + std::to_string(kv_block_tokens) +
                      "): one such sequence could never be held");
  }
}

nlohmann::json SchedulerConfig::ToJson() const {
  nlohmann::json json = {
      {"kv_block_tokens", kv_block_tokens},
      {"kv_blocks", kv_blocks},
      {"kv_tokens", kv_blocks * kv_block_tokens},
      {"max_running_sequences", max_running_sequences},
      {"max_batched_tokens", max_batched_tokens},
      {"prefill_chunk_tokens", prefill_chunk_tokens},
      {"max_waiting_requests", max_waiting_requests},
      {"max_sequence_tokens", max_sequence_tokens},
      {"decode_tokens_per_step", decode_tokens_per_step},
      {"queue_order", QueueOrderName(order)},
      {"preemption", PreemptionModeName(preemption)},
  };
  if (preemption == PreemptionMode::kSwap) json["host_kv_blocks"] = host_kv_blocks;
  return json;
}

std::string QueueOrderName(QueueOrder order) {
  return order == QueueOrder::kPriority ? "priority" : "fcfs";
}

std::string PreemptionModeName(PreemptionMode mode) {
  return mode == PreemptionMode::kSwap ? "swap" : "recompute";
}

QueueOrder ParseQueueOrder(const std::string& text) {
  if (text == "fcfs") return QueueOrder::kFcfs;
  if (text == "priority") return QueueOrder::kPriority;
  throw base::Error("--queue-order " + text + ": expected fcfs or priority");
}

PreemptionMode ParsePreemptionMode(const std::string& text) {
  if (text == "recompute") return PreemptionMode::kRecompute;
  if (text == "swap") return PreemptionMode::kSwap;
  throw base::Error("--preemption " + text + ": expected recompute or swap");
}

}  // namespace moelab::scheduler
