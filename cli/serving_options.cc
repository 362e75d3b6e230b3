#include "cli/serving_options.h"

#include "base/error.h"
#include "base/limits.h"

namespace moelab::cli {

double SloSeconds(double seconds, const std::string& option) {
  base::CheckSeconds(seconds, option);
  if (seconds <= 0) throw base::Error(option + " must be above 0 s");
  return seconds;
}

void AddLoadOptions(po::options_description& options, serving::LoadSpec& load,
                    serving::ServiceLevelObjectives& slo) {
  // clang-format off
  options.add_options()
      ("arrivals", ParsedInto(&load.arrivals, "poisson:1", [](const std::string& text) { return serving::ParseArrivals(text, "--arrivals"); }), "poisson:RATE | gamma:RATE,CV | constant:RATE | trace:FILE (requests per second)")
      ("requests", po::value<int64_t>()->notifier([&load](int64_t count) { load.requests = count; }), "requests to send (or --duration)")
      ("duration", ParsedIntoOptional(&load.duration_s, [](const std::string& text) { return base::CheckSeconds(base::ParseNumber(text, "duration"), "--duration"); }), "send arrivals before S seconds (or --requests)")
      ("prompt-tokens", ParsedInto(&load.prompt_tokens, "512", [](const std::string& text) { return serving::ParseLengths(text, "--prompt-tokens"); }), "prompt length: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("output-tokens", ParsedInto(&load.output_tokens, "128", [](const std::string& text) { return serving::ParseLengths(text, "--output-tokens"); }), "output length: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("seed", Into(&load.seed), "seed of the arrivals and lengths")
      ("slo-ttft", ParsedIntoOptional(&slo.ttft_s, [](const std::string& text) { return SloSeconds(base::ParseNumber(text, "slo-ttft"), "--slo-ttft"); }), "TTFT objective in seconds (goodput)")
      ("slo-tpot", ParsedIntoOptional(&slo.tpot_s, [](const std::string& text) { return SloSeconds(base::ParseNumber(text, "slo-tpot"), "--slo-tpot"); }), "TPOT objective in seconds (goodput)");
  // clang-format on
}

void CheckLoadOptions(const po::variables_map& values, const serving::LoadSpec& load) {
  const bool requests = values.count("requests") > 0, duration = values.count("duration") > 0;
  if (requests && duration) throw base::Error("give --requests or --duration, not both");
  // A trace's own rows say how many requests arrive; the other processes need a bound.
  if (!requests && !duration && load.arrivals.kind != serving::ArrivalProcess::Kind::kTrace) {
    throw base::Error("--requests N or --duration S is required");
  }
}

void AddSchedulerOptions(po::options_description& options, scheduler::SchedulerConfig& config,
                         SchedulerHost host) {
  const bool engine = host == SchedulerHost::kEngine;
  // serve's engine has one KV tier sized by the flag; sim serve can size it from the cost source.
  const char* kv_blocks_help =
      engine ? "KV-cache budget in blocks of --kv-block-tokens (at least 1)"
             : "KV-cache budget in blocks (0: from the memory left beside the weights)";
  const char* preemption_help =
      engine ? "recompute (swap is refused: the engine has no second KV-cache tier)"
             : "recompute | swap (needs --host-kv-blocks)";
  const char* host_kv_blocks_help =
      engine ? "not supported by the engine (0 only)"
             : "KV blocks the host tier holds for swapped sequences (--preemption swap)";
  // clang-format off
  options.add_options()
      ("kv-blocks", Into(&config.kv_blocks), kv_blocks_help)
      ("kv-block-tokens", Into(&config.kv_block_tokens), "tokens per KV block")
      ("max-running", Into(&config.max_running_sequences), "sequences in one iteration at most")
      ("max-batched-tokens", Into(&config.max_batched_tokens), "tokens one iteration processes at most (decodes and prefill chunks)")
      ("prefill-chunk", Into(&config.prefill_chunk_tokens), "a prefill chunk's tokens at most (0: up to --max-batched-tokens)")
      ("max-waiting", Into(&config.max_waiting_requests), "requests the queue holds; an arrival beyond is refused")
      ("max-sequence-tokens", Into(&config.max_sequence_tokens), "prompt + output tokens at most (0: the KV budget)")
      ("queue-order", ParsedInto(&config.order, "fcfs", scheduler::ParseQueueOrder), "fcfs | priority")
      ("preemption", ParsedInto(&config.preemption, "recompute", scheduler::ParsePreemptionMode), preemption_help)
      ("host-kv-blocks", Into(&config.host_kv_blocks), host_kv_blocks_help);
  // clang-format on
}

}  // namespace moelab::cli
