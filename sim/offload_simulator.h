#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_source.h"
#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "policies/decision_log.h"
#include "policies/gate_signals.h"
#include "policies/offload_policy.h"
#include "routing/routing_source.h"
#include "policies/calibration.h"
#include "sim/event_queue.h"
#include "sim/op_graph.h"
#include "sim/workload.h"

namespace moelab::sim {

// A discrete-event simulation of MoE inference with expert offloading (sim/README.md).
//
// One accelerator and its host. Resources (sim/op_graph.h), each a non-preemptive server with
// its own queue and clock: accelerator compute, CPU compute (all --cpu-threads on one op at a
// time), host-to-device and device-to-host copy engines, the storage reader. Memory tiers:
// accelerator memory (embeddings, LM head, the dense part and KV cache of every layer it runs,
// staging buffers, the expert cache), host RAM (every expert that fits; the least popular rest on
// storage, streamed through the storage reader whenever used) and storage.
//
// A pass runs layer after layer: the dense part of layer t on the device the policy names, then,
// for a MoE layer, routing from the routing source, the policy's plan, and the experts: resident
// ones on the accelerator (after their copy when it is still in flight), fetched ones after a
// host-to-device copy, CPU ones on the CPU with activations crossing the link when the dense part
// is on the other device. Layer t+1 starts when every expert of layer t is done. Prefetches run
// on the copy engine behind demand copies. Passes run back to back.
struct SimConfig {
  model::MoeModelSpec model;  // with any --expert-bits / --attention-bits already applied
  model::HardwareSpec hardware;
  // What prices the accelerator's and the host's operators (fit/cost_source_options.h chooses:
  // a roofline, calibrated or not, or a fitted profile); both required. The report names them
  // (CostSourceName).
  std::shared_ptr<const model::CostSource> accelerator_costs, host_costs;
  // Bits per element of the KV cache and of the activations crossing the host link.
  double kv_bits = 16;
  double activation_bits = 16;
  std::string policy = "resident";
  policies::PolicyOptions policy_options;
  Workload workload;
  routing::RoutingSpec routing;  // --routing, parsed once (ParseRoutingSpec) by the caller
  uint64_t seed = 0;
  std::optional<double> accelerator_bytes;  // overrides the accelerator's memory
  int64_t cpu_threads = 0;                  // 0: all the host's cores
  // Time the compute stream spends per transformer layer and pass outside the priced kernels:
  // the framework's dispatch (Python, per-op launches and synchronisation of an eager PyTorch
  // implementation such as Mixtral-offloading's). 0 (the default) for a compiled engine like
  // moelab's executor. Copies overlap it, as they overlap compute.
  double layer_overhead_s = 0;
  bool record_timeline = false;
  policies::CalibrationOptions calibration;
  // Replayed instead of the gate's stand-ins where a pass and layer has them (the executor's
  // offload runtime records them: policies/gate_signals.h).
  std::shared_ptr<const policies::GateSignals> gate_signals;
  // The speculative gate's recall (Mixtral-offloading's next-layer prefetch) when no signals are
  // replayed: each expert the next layer will use is ranked first with this probability (seeded),
  // the rest by the co-occurrence stand-in; nullopt: the stand-in alone. Default 0.8, read from
  // Eliseev & Mazur (2023), Figure 2 right (recall of 1-layer-ahead speculative loading at 2
  // experts); our executor's real speculative gate measures 0.79 on its synthetic weights
  // (results/offload-runtime.md).
  std::optional<double> speculative_recall = kDefaultSpeculativeRecall;
  static constexpr double kDefaultSpeculativeRecall = 0.8;
  bool record_decisions = false;  // SimResult::decisions
  // Serving (sim/serving_offload_cost.h): the passes come one at a time from the serving
  // simulator's iterations, not from `workload` (whose batch is then the most sequences one pass
  // carries), and the memory plan holds this many KV tokens (the scheduler's KV budget).
  std::optional<int64_t> serving_kv_tokens;

  void Validate() const;  // Error naming the option
};

struct SimResult {
  // Echo of the configuration, for the report.
  std::string model, hardware, accelerator_name, cpu_name, compute_dtype, policy, routing,
      calibration_source, cost_source;
  bool calibration_in_sample = false;
  std::vector<std::pair<std::string, double>> policy_options;
  Workload workload;
  uint64_t seed = 0;
  int64_t cpu_threads = 0;
  double layer_overhead_s = 0;

  // Latency and throughput (executor conventions, docs/executor.md).
  Seconds ttft_s = 0;
  std::optional<Seconds> tpot_s;  // absent for prefill or a single output token
  std::optional<double> tokens_per_s;
  Seconds total_s = 0;
  int64_t passes = 0;
  std::vector<Seconds> pass_end_s;  // when each pass ended (the first: the prefill's TTFT)

  // Experts: one activation = one expert used by one pass at one layer (whatever its tokens).
  int64_t expert_activations = 0;
  int64_t hits = 0;               // weights on the accelerator when needed
  int64_t inflight_hits = 0;      // weights already on their way (a prefetch or earlier fetch)
  int64_t demand_fetches = 0;     // copied into the cache because a token needed them
  int64_t transient_fetches = 0;  // copied into a staging buffer, run, dropped (Fiddler)
  int64_t cpu_runs = 0;
  int64_t routed_tokens = 0, hit_tokens = 0;  // token-weighted (tokens x experts)
  int64_t prefetches = 0, prefetches_used = 0, prefetches_wasted = 0;
  double hit_rate() const;        // (hits + inflight_hits) / activations
  double token_hit_rate() const;  // the same weighted by tokens (Fiddler's measure)

  // Bytes moved per tier.
  double bytes_h2d_expert_weights = 0;  // host -> accelerator, expert weights
  double bytes_h2d_activations = 0;     // host -> accelerator, hidden states
  double bytes_d2h_activations = 0;     // accelerator -> host
  double bytes_storage_read = 0;        // storage -> host
  double bytes_initial_load = 0;        // placed before the first token (untimed)
  int64_t expert_bytes = 0;

  // Busy seconds per resource (index: Resource).
  double busy_s[kResourceCount] = {};

  // Memory plan.
  double accelerator_bytes = 0, fixed_bytes = 0, dense_bytes_on_accelerator = 0, kv_bytes = 0;
  int64_t expert_slots = 0, staging_buffers = 0, experts_total = 0, experts_on_storage = 0;
  bool fits_accelerator = true;  // false only for 'resident' on a model larger than the memory
  // What the compute device's passes cycle through (model::PassWorkingSetBytes) when the host
  // computes (its cache regime); 0: the whole model, the cost source's default.
  double compute_working_set_bytes = 0;
  // The first pass priced from DRAM, whatever the working set, because an earlier pass read
  // experts from storage (the host computes); absent: no read moved the passes to DRAM (the first
  // pass is priced from DRAM regardless; compute_in_working_set_from_pass).
  std::optional<int64_t> compute_from_dram_from_pass;
  // The pass from which the working set's regime prices the computation (the host computes): the
  // second, when the first read nothing from storage; absent: every pass priced from DRAM (the
  // first pass always is, since no earlier pass brought the weights into the cache).
  std::optional<int64_t> compute_in_working_set_from_pass;
  model::FiddlerLatencyModel latency;

  policies::PolicyStats policy_stats;
  std::vector<policies::DecisionEvent> decisions;  // when SimConfig::record_decisions
  uint64_t events = 0;                             // events the queue processed
  int64_t expert_events = 0;  // expert computations + expert weight copies + storage reads

  struct TimelineEntry {
    Seconds start_s, duration_s;
    Resource resource;
    uint8_t kind;
    int32_t layer, expert;
    int64_t pass;
    bool prefetch;
  };
  std::vector<TimelineEntry> timeline;  // when SimConfig::record_timeline

  // The report ("moelab.sim_offload/1" without provenance; docs in sim/README.md).
  nlohmann::json ToJson() const;
  // Chrome trace-event JSON (opens in Perfetto / chrome://tracing): "traceEvents" of ph "X"
  // complete events in microseconds, pid 1 = the accelerator (tids: compute, H2D, D2H copy
  // engines), pid 2 = the host (tids: CPU, storage reader). Same run, same bytes.
  std::string TimelineJson() const;
};

// Loads nothing: the config carries the specs. Errors (moelab::Error) name the option.
SimResult SimulateOffload(const SimConfig& config);

// The same with a routing source and calibration supplied by the caller (tests, benchmarks):
// `routing` must route config.model's MoE layers; config.routing is only reported.
SimResult SimulateOffload(const SimConfig& config, routing::RoutingSource& routing,
                          const policies::RoutingCalibration& calibration);

}  // namespace moelab::sim
