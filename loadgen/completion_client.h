#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "loadgen/server_url.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"

namespace moelab::loadgen {

using Clock = std::chrono::steady_clock;

// What every request of a run shares.
struct CompletionSettings {
  ServerUrl url;
  std::optional<std::string> model;  // the body's "model" (vLLM needs its served name)
  double timeout_s = 600;            // a request not finished by then fails as "timeout"
  int64_t vocab = 256;               // prompt token ids are drawn from 1..vocab-1
  bool ignore_eos = false;           // the body's "ignore_eos": true (vLLM, llama-server)
  bool stream_usage = false;  // "stream_options": {"include_usage": true}: vLLM's usage chunk
  uint64_t seed = 0;          // the prompt token ids' seed
};

// The JSON body of `request`: {"model"?, "prompt": [ids], "max_tokens": output_tokens,
// "stream": true, "ignore_eos"?, "stream_options"?}. The prompt is `prompt_tokens` token ids, each
// uniform in 1..vocab-1 from a SplitMix64 stream of (seed, request id): distinct across requests,
// so no server's prefix cache shortens a prefill the load meant to send.
std::string CompletionBody(const CompletionSettings& settings, const serving::RequestSpec& request);

// Sends `request` (POST url.CompletionsPath(), streaming) and measures it: times in seconds from
// `run_start`, arrival_s the scheduled arrival (so a send delayed by the load generator counts in
// TTFT, as a queue would), each token chunk's time, finish at data: [DONE]. output_tokens is the
// server's usage.completion_tokens when it sends one, else the token chunks counted. A failure
// (connection, HTTP status, malformed stream, timeout) is named in `error` and never throws.
serving::RequestOutcome SendCompletion(const CompletionSettings& settings,
                                       const serving::RequestSpec& request,
                                       Clock::time_point run_start);

}  // namespace moelab::loadgen
