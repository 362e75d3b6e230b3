#pragma once

#include <cstdint>
#include <vector>

#include "model/fiddler.h"
#include "model/model_spec.h"
#include "policies/offload_policy.h"

namespace moelab::policies {

// What lives where before the first token: a pure function of the model's byte counts, the
// hardware's memory sizes and the policy's choices, shared by the simulator and the executor's
// offload runtime so both size the expert cache the same way. No clock, no engine types.

// The memory numbers of OffloadSetup for a model: embeddings + LM head, and per transformer layer
// its dense part (attention and norms, plus router and shared experts on a MoE layer or the dense
// FFN on a dense one) with that layer's KV cache for `kv_tokens` positions at `kv_bits` bits.
struct ModelMemory {
  double fixed_bytes = 0;                 // embeddings + LM head
  std::vector<double> dense_layer_bytes;  // [transformer layer]: weights + KV cache
  double kv_bytes_per_layer = 0;          // the KV share of each dense_layer_bytes entry
  double kv_bytes = 0;                    // every layer's KV cache
};
ModelMemory ModelMemoryOf(const model::MoeModelSpec& model, double kv_bits, int64_t kv_tokens);

// The policy's side of the plan: where each layer's dense part runs, the expert slots it works
// with, the staging buffers it reserves, and whether it is the ideal that ignores the limit.
struct PolicyMemoryDemand {
  std::vector<Device> dense_device;  // [transformer layer]
  int64_t expert_slots = 0;
  int64_t staging_buffers = 0;
  bool ignores_memory_limit = false;
};
PolicyMemoryDemand MemoryDemandOf(const OffloadPolicy& policy, int64_t num_layers);

struct MemoryPlan {
  double accelerator_bytes = 0;           // the accelerator's memory for the run
  double fixed_bytes = 0;                 // embeddings + LM head
  double dense_bytes_on_accelerator = 0;  // dense parts (with KV) of the accelerator's layers
  double dense_bytes_on_host = 0;         // dense parts (with KV) of the CPU's layers
  // Accelerator bytes left for the expert cache after fixed, dense and staging bytes (negative
  // when even those overflow), and the whole experts that fit there (0 when none).
  double expert_budget_bytes = 0;
  int64_t available_expert_slots = 0;
  int64_t expert_slots = 0;      // what the policy asks for
  int64_t staging_buffers = 0;   // what the policy reserves
  bool fits_accelerator = true;  // budget >= 0 and the slots fit
  int64_t experts_total = 0;     // MoE layers x experts per layer
  // Host RAM holds every expert that fits next to the CPU layers' dense parts (and a copy of the
  // fixed weights when any layer runs there); the least popular rest live on storage. Empty (and
  // 0) for a policy that ignores the memory limit: its experts are all on the accelerator.
  int64_t experts_on_storage = 0;
  std::vector<model::ExpertId> on_storage;  // PlaceLeastPopular order
};

// `popularity` ranks experts for storage ([moe layer][expert] calibration counts).
MemoryPlan PlanMemory(const OffloadSetup& setup, const PolicyMemoryDemand& demand,
                      double host_dram_bytes, const model::PopularityTable& popularity);

}  // namespace moelab::policies
