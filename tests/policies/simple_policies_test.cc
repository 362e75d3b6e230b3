// resident, on-demand, static-split and stream-all.
#include <gtest/gtest.h>

#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::Demand;
using testing::ErrorOf;
using testing::Plan;
using testing::TinySetup;

TEST(ResidentPolicy, PlacesEverythingAndRunsEverythingResident) {
  auto policy = MakeOffloadPolicy("resident", {}, TinySetup(3, 8, 2, 1));
  EXPECT_TRUE(policy->IgnoresMemoryLimit());
  EXPECT_EQ(policy->InitialPlacement().size(), 24u);
  const LayerPlan plan = Plan(*policy, {1, {{2, 5}, {7, 1}}});
  ASSERT_EQ(plan.decisions.size(), 2u);
  for (const ExpertDecision& d : plan.decisions) EXPECT_EQ(d.action, ExpertAction::kResident);
  EXPECT_TRUE(plan.prefetches.empty());
}

TEST(OnDemandPolicy, StartsWithThePopularAndEvictsTheGlobalLeastRecentlyUsed) {
  OffloadSetup setup = TinySetup(2, 4, 1, 3);
  setup.popularity = {{1, 9, 1, 1}, {8, 1, 7, 1}};  // most popular: (0,1), (1,0), (1,2)
  auto policy = MakeOffloadPolicy("on-demand", {}, setup);
  EXPECT_EQ(policy->ExpertSlots(), 3);
  const std::vector<ExpertRef> placed = policy->InitialPlacement();
  ASSERT_EQ(placed.size(), 3u);
  // Least popular loaded first so that it is the least recent: (1,2), (1,0), (0,1).
  EXPECT_EQ(placed[0], (ExpertRef{1, 2}));
  EXPECT_EQ(placed[2], (ExpertRef{0, 1}));

  LayerPlan plan = Plan(*policy, {0, {{1, 1}}});  // hit
  EXPECT_EQ(plan.decisions[0].action, ExpertAction::kResident);
  plan = Plan(*policy, {0, {{3, 1}}});  // miss: evicts (1,2), the least recent
  ASSERT_EQ(plan.decisions[0].action, ExpertAction::kFetch);
  EXPECT_EQ(plan.decisions[0].target, FetchTarget::kCache);
  EXPECT_EQ(*plan.decisions[0].evict, (ExpertRef{1, 2}));
  plan = Plan(*policy, {1, {{2, 1}}});  // miss: evicts (1,0)
  EXPECT_EQ(*plan.decisions[0].evict, (ExpertRef{1, 0}));
}

TEST(OnDemandPolicy, NeverEvictsAnExpertTheLayerUsesWhenAnotherIsAvailable) {
  auto policy = MakeOffloadPolicy("on-demand", {}, TinySetup(2, 4, 2, 2));
  policy->InitialPlacement();  // flat popularity: (0,0), (0,1), MRU first after loading order
  // Layer 0 needs 0 (cached) and 2 (missing): the victim must be 1, not 0.
  const LayerPlan plan = Plan(*policy, {0, {{0, 1}, {2, 1}}});
  EXPECT_EQ(plan.decisions[0].action, ExpertAction::kResident);
  ASSERT_EQ(plan.decisions[1].action, ExpertAction::kFetch);
  EXPECT_EQ(*plan.decisions[1].evict, (ExpertRef{0, 1}));
}

TEST(OnDemandPolicy, RefusesMemoryWithoutRoomForOneExpert) {
  EXPECT_CONTAINS(ErrorOf([] { MakeOffloadPolicy("on-demand", {}, TinySetup(2, 4, 2, 0)); }),
                  "leaves no room for a single expert");
}

TEST(StaticSplitPolicy, DefaultsToTheLayersThatFit) {
  OffloadSetup setup = TinySetup(4, 4, 2, 9);  // 2 layers of 4 experts fit (8 <= 9), 3 do not
  auto policy = MakeOffloadPolicy("static-split", {}, setup);
  EXPECT_EQ(policy->DenseDevice(1), Device::kAccelerator);
  EXPECT_EQ(policy->DenseDevice(2), Device::kCpu);
  EXPECT_EQ(policy->InitialPlacement().size(), 8u);
  EXPECT_EQ(Plan(*policy, {1, {{3, 1}}}).decisions[0].action, ExpertAction::kResident);
  EXPECT_EQ(Plan(*policy, {2, {{3, 1}}}).decisions[0].action, ExpertAction::kCpu);
}

TEST(StaticSplitPolicy, GpuLayersIsCheckedAgainstTheModelAndTheMemory) {
  PolicyOptions options;
  options.gpu_layers = 1;
  auto one = MakeOffloadPolicy("static-split", options, TinySetup(4, 4, 2, 9));
  EXPECT_EQ(one->ExpertSlots(), 4);
  options.gpu_layers = 3;
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("static-split", options, TinySetup(4, 4, 2, 9)); }),
      "--gpu-layers 3: layers 0-2 need");
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("static-split", options, TinySetup(4, 4, 2, 9)); }),
      "at most 2 layers fit");
  options.gpu_layers = 5;
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("static-split", options, TinySetup(4, 4, 2, 99)); }),
      "--gpu-layers must be in [0, 4]");
}

TEST(StaticSplitPolicy, LeadingDenseLayersCountAsLayers) {
  OffloadSetup setup = TinySetup(3, 4, 2, 5);
  setup.num_layers = 4;
  setup.first_dense_layers = 1;
  setup.dense_layer_bytes.assign(4, 0.0);
  PolicyOptions options;
  options.gpu_layers = 2;  // the dense layer and MoE layer 0
  auto policy = MakeOffloadPolicy("static-split", options, setup);
  EXPECT_EQ(policy->ExpertSlots(), 4);
  EXPECT_EQ(Plan(*policy, {0, {{1, 1}}}).decisions[0].action, ExpertAction::kResident);
  EXPECT_EQ(Plan(*policy, {1, {{1, 1}}}).decisions[0].action, ExpertAction::kCpu);
}

TEST(StreamAllPolicy, LoadsEveryExpertOfTheLayerEveryPassAndKeepsNothing) {
  auto policy = MakeOffloadPolicy("stream-all", {}, TinySetup(2, 4, 2, 0, 4));
  EXPECT_EQ(policy->ExpertSlots(), 0);
  EXPECT_EQ(policy->StagingBuffersUsed(), 4);
  EXPECT_TRUE(policy->InitialPlacement().empty());
  for (int pass = 0; pass < 2; ++pass) {
    LayerPlan plan = Plan(*policy, {0, {{1, 1}, {3, 2}}});
    ASSERT_EQ(plan.decisions.size(), 2u);
    for (const ExpertDecision& d : plan.decisions) {
      EXPECT_EQ(d.action, ExpertAction::kFetch);
      EXPECT_EQ(d.target, FetchTarget::kTransient);
    }
    // The unused experts 0 and 2 are read too, into staging buffers, and dropped next layer.
    ASSERT_EQ(plan.prefetches.size(), 2u);
    EXPECT_EQ(plan.prefetches[0].expert, (ExpertRef{0, 0}));
    EXPECT_EQ(plan.prefetches[1].expert, (ExpertRef{0, 2}));
    EXPECT_EQ(plan.prefetches[1].target, FetchTarget::kStaged);
    plan = Plan(*policy, {1, {{0, 3}}});
    EXPECT_EQ(plan.discard_staged, (std::vector<ExpertRef>{{0, 0}, {0, 2}}));
    EXPECT_EQ(plan.prefetches.size(), 3u);
  }
}

TEST(StreamAllPolicy, RefusesMemoryWithoutOneLayersExperts) {
  EXPECT_CONTAINS(ErrorOf([] { MakeOffloadPolicy("stream-all", {}, TinySetup(2, 4, 2, 0, 3)); }),
                  "does not hold one layer's 4 experts");
}

}  // namespace
}  // namespace moelab::policies
