#include "policies/memory_plan.h"

#include <gtest/gtest.h>

#include "model/parameter_count.h"
#include "model/preset_store.h"
#include "tests/policies/policy_test_util.h"
#include "tests/support/test_paths.h"

namespace moelab::policies {
namespace {

using testing::TinySetup;

// 4 MoE layers, 8 experts of 1000 bytes; 10 slots' worth of accelerator memory.
OffloadSetup SetupWithDense() {
  OffloadSetup setup = TinySetup(4, 8, 2, 10);
  setup.fixed_bytes = 500;
  setup.dense_layer_bytes = {1000, 1000, 1000, 1000};
  return setup;
}

PolicyMemoryDemand Demand(int64_t accelerator_layers, int64_t slots, int64_t staging) {
  PolicyMemoryDemand demand;
  for (int64_t layer = 0; layer < 4; ++layer)
    demand.dense_device.push_back(layer < accelerator_layers ? Device::kAccelerator : Device::kCpu);
  demand.expert_slots = slots;
  demand.staging_buffers = staging;
  return demand;
}

TEST(MemoryPlan, SubtractsFixedDenseAndStagingBytesFromTheAccelerator) {
  // 10000 - 500 - 2 x 1000 - 1 x 1000 = 6500 bytes -> 6 whole experts.
  const MemoryPlan plan = PlanMemory(SetupWithDense(), Demand(2, 6, 1), 1e12, {});
  EXPECT_DOUBLE_EQ(plan.accelerator_bytes, 10000);
  EXPECT_DOUBLE_EQ(plan.fixed_bytes, 500);
  EXPECT_DOUBLE_EQ(plan.dense_bytes_on_accelerator, 2000);
  EXPECT_DOUBLE_EQ(plan.dense_bytes_on_host, 2000);
  EXPECT_DOUBLE_EQ(plan.expert_budget_bytes, 6500);
  EXPECT_EQ(plan.available_expert_slots, 6);
  EXPECT_EQ(plan.expert_slots, 6);
  EXPECT_EQ(plan.staging_buffers, 1);
  EXPECT_TRUE(plan.fits_accelerator);
  EXPECT_EQ(plan.experts_total, 32);
  // The same as OffloadSetup's own arithmetic.
  EXPECT_EQ(plan.available_expert_slots, SetupWithDense().ExpertSlots(2, 1));
}

TEST(MemoryPlan, OneSlotTooManyDoesNotFit) {
  EXPECT_FALSE(PlanMemory(SetupWithDense(), Demand(2, 7, 1), 1e12, {}).fits_accelerator);
  // Dense parts alone overflow: a negative budget, no slots, never fits.
  const MemoryPlan overflow = PlanMemory(SetupWithDense(), Demand(4, 0, 7), 1e12, {});
  EXPECT_LT(overflow.expert_budget_bytes, 0);
  EXPECT_EQ(overflow.available_expert_slots, 0);
  EXPECT_FALSE(overflow.fits_accelerator);
}

TEST(MemoryPlan, LeastPopularExpertsGoToStorageWhenHostRamIsShort) {
  OffloadSetup setup = SetupWithDense();
  model::PopularityTable popularity(4, std::vector<double>(8, 10.0));
  popularity[3][5] = 1;  // the least popular expert
  popularity[2][0] = 2;  // the next
  // Host: 2000 bytes of CPU dense parts + 500 fixed bytes (a CPU layer needs them) + 30 experts.
  const MemoryPlan plan = PlanMemory(setup, Demand(2, 6, 1), 2500 + 30 * 1000, popularity);
  EXPECT_EQ(plan.experts_on_storage, 2);
  ASSERT_EQ(plan.on_storage.size(), 2u);
  EXPECT_EQ(plan.on_storage[0], (model::ExpertId{3, 5}));
  EXPECT_EQ(plan.on_storage[1], (model::ExpertId{2, 0}));
  // Every dense part on the accelerator: the fixed bytes need no host copy.
  EXPECT_EQ(PlanMemory(setup, Demand(4, 4, 1), 30 * 1000, popularity).experts_on_storage, 2);
  // The ideal (resident) keeps nothing on storage.
  PolicyMemoryDemand ideal = Demand(4, 32, 0);
  ideal.ignores_memory_limit = true;
  const MemoryPlan resident = PlanMemory(setup, ideal, 0, popularity);
  EXPECT_EQ(resident.experts_on_storage, 0);
  EXPECT_TRUE(resident.on_storage.empty());
  EXPECT_FALSE(resident.fits_accelerator);
}

TEST(ModelMemory, DenseLayersCarryTheirKvCache) {
  const model::MoeModelSpec model = model::PresetStore(testing::PresetDir())
                                        .LoadModel("deepseek-v2-lite");  // one leading dense layer
  const model::WeightBytes weights = model::CountWeightBytes(model);
  const int64_t kv_tokens = 100;
  const ModelMemory memory = ModelMemoryOf(model, 16, kv_tokens);
  ASSERT_EQ(memory.dense_layer_bytes.size(), static_cast<size_t>(model.num_layers));
  const double kv_per_layer = static_cast<double>(model::KvCacheBytesPerToken(model, 16)) /
                              static_cast<double>(model.num_layers) * kv_tokens;
  EXPECT_DOUBLE_EQ(memory.kv_bytes_per_layer, kv_per_layer);
  EXPECT_DOUBLE_EQ(memory.kv_bytes, kv_per_layer * static_cast<double>(model.num_layers));
  EXPECT_DOUBLE_EQ(memory.fixed_bytes, weights.embeddings + weights.lm_head);
  EXPECT_DOUBLE_EQ(memory.dense_layer_bytes[0],
                   weights.attention + weights.dense_ffn + kv_per_layer);
  EXPECT_DOUBLE_EQ(memory.dense_layer_bytes[1],
                   weights.attention + weights.router + weights.shared_experts + kv_per_layer);
}

}  // namespace
}  // namespace moelab::policies
