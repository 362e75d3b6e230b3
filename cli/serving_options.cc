#include "cli/serving_options.h"

namespace moelab::cli {

void AddSchedulerOptions(po::options_description& options, scheduler::SchedulerConfig& config) {
  // clang-format off
  options.add_options()
      ("kv-blocks", Into(&config.kv_blocks), "KV-cache blocks in the budget (admission and preemption count them)")
      ("kv-block-tokens", Into(&config.kv_block_tokens), "tokens per KV-cache block")
      ("max-running", Into(&config.max_running_sequences), "sequences in one iteration at most")
      ("max-batched-tokens", Into(&config.max_batched_tokens), "tokens one iteration processes at most (decodes count 1 each; prefills are chunked into what is left)")
      ("prefill-chunk", Into(&config.prefill_chunk_tokens), "a prefill chunk's tokens at most (0: up to --max-batched-tokens)")
      ("max-waiting", Into(&config.max_waiting_requests), "requests waiting at most; an arrival beyond it is refused (HTTP 503)")
      ("max-sequence-tokens", Into(&config.max_sequence_tokens), "prompt + max_tokens of one request at most (0: the KV budget's tokens, --kv-blocks x --kv-block-tokens, or the model's max_positions when smaller)")
      ("queue-order", ParsedInto(&config.order, "fcfs", [](const std::string& text) { return scheduler::ParseQueueOrder(text); }), "fcfs | priority (requests' \"priority\" field, higher first)");
  // clang-format on
}

}  // namespace moelab::cli
