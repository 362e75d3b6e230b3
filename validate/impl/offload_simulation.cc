#include "validate/impl/offload_simulation.h"

#include <memory>

#include "base/error.h"
#include "executor/offload/offload_runtime.h"
#include "fit/storage_tier_hardware.h"
#include "model/parameter_count.h"
#include "policies/memory_plan.h"
#include "routing/routing_source.h"
#include "routing/routing_spec.h"

namespace moelab::validate::impl {

double CoupledComputeRate(const StorageRates& storage, double expert_bytes,
                          double link_bytes_per_s) {
  if (!(storage.measured_compute_rate > 0 && storage.beside_compute_bytes_per_s > 0)) return 1.0;
  return fit::ComputeRateWhileReading(storage.measured_compute_rate,
                                      expert_bytes / link_bytes_per_s,
                                      expert_bytes / storage.beside_compute_bytes_per_s);
}

sim::SimResult Simulate(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                        const fit::Profile& profile, const StorageRates& storage,
                        const std::shared_ptr<const model::CostSource>& costs, int threads,
                        bool record_timeline) {
  sim::SimConfig config;
  config.record_timeline = record_timeline;
  config.model = executor::SpecFromExecutorConfig(bench.config);
  config.policy = c.policy;
  config.workload.kind = c.kind == CaseKind::kOffloadPrefill ? sim::WorkloadKind::kPrefill
                         : c.batch > 1                       ? sim::WorkloadKind::kBatch
                                                             : sim::WorkloadKind::kDecode;
  config.workload.batch = c.batch;
  config.workload.prompt_tokens = c.prompt;
  config.workload.output_tokens = c.output_tokens;
  config.routing = routing::ParseRoutingSpec("trace:" + recorded.file);
  config.seed = bench.seed;
  config.cpu_threads = threads;
  config.accelerator_costs = costs;
  config.host_costs = costs;
  config.gate_signals = recorded.signals;
  // The executor's budget holds expert_slots experts beside the non-expert weights it keeps in RAM
  // anyway: the simulator's memory is those bytes plus the same slots (and half of one, so
  // rounding cannot take a slot away).
  const policies::ModelMemory memory =
      policies::ModelMemoryOf(config.model, config.kv_bits, config.workload.KvTokens());
  double dense = 0;
  for (double bytes : memory.dense_layer_bytes) dense += bytes;
  const double memory_bytes = memory.fixed_bytes + dense +
                              (static_cast<double>(c.expert_slots) + 0.5) *
                                  static_cast<double>(model::ExpertBytes(config.model));
  config.hardware =
      fit::StorageTierHardwareFromProfile(profile, memory_bytes, storage.alone_bytes_per_s,
                                          executor::offload::OffloadOptions{}.reader_threads);
  if (storage.alone_bytes_per_s > 0) {
    config.hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s =
        storage.beside_compute_bytes_per_s;
    config.hardware.host->compute_rate_while_storage_reads =
        CoupledComputeRate(storage, static_cast<double>(model::ExpertBytes(config.model)),
                           config.hardware.host_link->host_to_device_bandwidth_bytes_per_s);
  }
  config.accelerator_bytes = memory_bytes;
  std::unique_ptr<routing::RoutingSource> routing =
      routing::MakeTraceRouting(recorded.trace, bench.config.num_layers, bench.config.num_experts,
                                bench.config.top_k, recorded.file);
  sim::SimResult simulated = sim::SimulateOffload(config, *routing, recorded.calibration);
  if (c.kind == CaseKind::kOffload && !simulated.tpot_s)
    throw base::Error("validate offload: the simulator gave no TPOT for " + c.Label() + " (a bug)");
  return simulated;
}

double PredictedQuantity(const sim::SimResult& simulated, bool prefill) {
  return prefill ? simulated.ttft_s : *simulated.tpot_s;
}

std::string ReadPricingSource(const model::HardwareSpec& hardware) {
  for (const std::string& source : hardware.sources) {
    if (source.find("expert_reader") != std::string::npos) return source;
  }
  return "no source says (a bug)";
}

}  // namespace moelab::validate::impl
