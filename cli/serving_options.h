#pragma once

#include "cli/options.h"
#include "scheduler/scheduler_config.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"

namespace moelab::cli {

// The load options of loadgen and sim serve, bound to `load` and `slo`: --arrivals,
// --requests | --duration, --prompt-tokens, --output-tokens, --seed, --slo-ttft, --slo-tpot
// (serving/load_spec.h's text forms; the same seed gives the same requests to both).
// A service-level objective in seconds: finite, above 0 and at most base::kMaxSeconds; else an
// error naming `option` (loadgen and sim serve take the same).
double SloSeconds(double seconds, const std::string& option);

void AddLoadOptions(po::options_description& options, serving::LoadSpec& load,
                    serving::ServiceLevelObjectives& slo);
// After parsing: one of --requests and --duration (errors name them).
void CheckLoadOptions(const po::variables_map& values, const serving::LoadSpec& load);

// Who runs the scheduler: serve's engine (KV budget given in blocks, recompute preemption only)
// or sim serve's simulator (KV budget from the cost source's memory when 0, swap to a host tier).
enum class SchedulerHost { kEngine, kSimulator };

// The scheduler options of serve and sim serve, bound to `config`: --kv-blocks,
// --kv-block-tokens, --max-running, --max-batched-tokens, --prefill-chunk, --max-waiting,
// --max-sequence-tokens, --queue-order, --preemption, --host-kv-blocks; their help says what
// `host` does with them.
void AddSchedulerOptions(po::options_description& options, scheduler::SchedulerConfig& config,
                         SchedulerHost host);

}  // namespace moelab::cli
