#include "policies/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "model/parameter_count.h"

namespace moelab::policies {

ModelMemory ModelMemoryOf(const model::MoeModelSpec& model, double kv_bits, int64_t kv_tokens) {
  const model::WeightBytes weights = model::CountWeightBytes(model);
  const int64_t first_dense = model.moe ? model.moe->first_dense_layers : model.num_layers;
  const double kv_per_token_layer =
      static_cast<double>(model::KvCacheBytesPerToken(model, kv_bits)) /
      static_cast<double>(model.num_layers);
  ModelMemory memory;
  memory.kv_bytes_per_layer = kv_per_token_layer * static_cast<double>(kv_tokens);
  memory.kv_bytes = memory.kv_bytes_per_layer * static_cast<double>(model.num_layers);
  memory.fixed_bytes = weights.embeddings + weights.lm_head;
  for (int64_t layer = 0; layer < model.num_layers; ++layer) {
    const bool moe = layer >= first_dense;
    memory.dense_layer_bytes.push_back(
        weights.attention + (moe ? weights.router + weights.shared_experts : weights.dense_ffn) +
        memory.kv_bytes_per_layer);
  }
  return memory;
}

PolicyMemoryDemand MemoryDemandOf(const OffloadPolicy& policy, int64_t num_layers) {
  PolicyMemoryDemand demand;
  for (int64_t layer = 0; layer < num_layers; ++layer)
    demand.dense_device.push_back(policy.DenseDevice(layer));
  demand.staging_buffers = policy.StagingBuffersUsed();
  demand.expert_slots = policy.ExpertSlots();
  demand.ignores_memory_limit = policy.IgnoresMemoryLimit();
  return demand;
}

MemoryPlan PlanMemory(const OffloadSetup& setup, const PolicyMemoryDemand& demand,
                      double host_dram_bytes, const model::PopularityTable& popularity) {
  MemoryPlan plan;
  plan.accelerator_bytes = setup.accelerator_bytes;
  plan.fixed_bytes = setup.fixed_bytes;
  for (size_t layer = 0; layer < demand.dense_device.size(); ++layer) {
    (demand.dense_device[layer] == Device::kAccelerator ? plan.dense_bytes_on_accelerator
                                                        : plan.dense_bytes_on_host) +=
        setup.dense_layer_bytes[layer];
  }
  const double expert_bytes = static_cast<double>(setup.expert_bytes);
  plan.staging_buffers = demand.staging_buffers;
  plan.expert_budget_bytes = setup.accelerator_bytes - setup.fixed_bytes -
                             plan.dense_bytes_on_accelerator -
                             static_cast<double>(demand.staging_buffers) * expert_bytes;
  plan.available_expert_slots =
      plan.expert_budget_bytes > 0
          ? static_cast<int64_t>(std::floor(plan.expert_budget_bytes / expert_bytes))
          : 0;
  plan.expert_slots = demand.expert_slots;
  plan.fits_accelerator =
      plan.expert_budget_bytes >= 0 && plan.expert_slots <= plan.available_expert_slots;
  plan.experts_total = setup.num_moe_layers * setup.num_experts;

  const double host_bytes = host_dram_bytes - plan.dense_bytes_on_host -
                            (plan.dense_bytes_on_host > 0 ? setup.fixed_bytes : 0);
  const int64_t host_experts =
      host_bytes > 0 ? static_cast<int64_t>(std::floor(host_bytes / expert_bytes)) : 0;
  if (!demand.ignores_memory_limit) {
    plan.experts_on_storage = std::max<int64_t>(0, plan.experts_total - host_experts);
    plan.on_storage = model::PlaceLeastPopular(popularity, plan.experts_on_storage);
  }
  return plan;
}

}  // namespace moelab::policies
