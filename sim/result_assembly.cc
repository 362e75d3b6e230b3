// The SimResult a run leaves: latency and throughput by the executor's conventions
// (docs/executor.md), busy time per resource, the policy's own counters and the echo of what
// priced the run. The engine fills the counters as it goes; the report is report.cc's.
#include "sim/engine.h"

namespace moelab::sim {

void Engine::Finish() {
  SimResult& r = result_;
  r.passes = pass_;
  const double later = static_cast<double>(config_.workload.output_tokens - 1);
  const double decode_s = r.total_s - r.ttft_s;
  const double batch = static_cast<double>(config_.workload.batch);
  switch (config_.workload.kind) {
    case WorkloadKind::kPrefill:
      r.tokens_per_s = batch * static_cast<double>(config_.workload.prompt_tokens) / r.ttft_s;
      break;
    case WorkloadKind::kBeam:
      if (later > 0) {
        r.tpot_s = decode_s / later;
        r.tokens_per_s = later / decode_s;
      }
      break;
    default:
      if (later > 0) {
        r.tpot_s = decode_s / later;
        r.tokens_per_s = batch * later / decode_s;
      }
      break;
  }
  for (int i = 0; i < kResourceCount; ++i) r.busy_s[i] = graph_.busy_s(static_cast<Resource>(i));
  r.events = graph_.events();
  r.policy_stats = policy_->Stats();
  r.policy_options = policy_->ResolvedOptions();
  r.expert_bytes = expert_bytes_;
  r.accelerator_name = cost_.accelerator_name();
  r.cpu_name = cost_.cpu_name();
  r.compute_dtype = cost_.compute_dtype();
  r.cost_source = cost_.source_name();
  r.cpu_threads = cost_.cpu_threads();
  r.layer_overhead_s = config_.layer_overhead_s;
}

double SimResult::hit_rate() const {
  return expert_activations > 0
             ? static_cast<double>(hits + inflight_hits) / static_cast<double>(expert_activations)
             : 0;
}

double SimResult::token_hit_rate() const {
  return routed_tokens > 0 ? static_cast<double>(hit_tokens) / static_cast<double>(routed_tokens)
                           : 0;
}

}  // namespace moelab::sim
