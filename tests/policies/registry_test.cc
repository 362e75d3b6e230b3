#include "policies/registry.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::ErrorOf;
using testing::TinySetup;

TEST(PolicyRegistry, RegistersTheSevenPoliciesInOrder) {
  EXPECT_EQ(DefaultPolicyRegistry().Names(),
            (std::vector<std::string>{"resident", "on-demand", "static-split", "lru-prefetch",
                                      "fiddler", "fmoe", "stream-all"}));
  for (const std::string& name : DefaultPolicyRegistry().Names()) {
    const auto policy = MakeOffloadPolicy(name, {}, TinySetup(4, 8, 2, 16, 4));
    EXPECT_EQ(policy->Name(), name);
  }
}

TEST(PolicyRegistry, UnknownNameListsTheValidOnes) {
  const std::string message = ErrorOf([] { MakeOffloadPolicy("lru", {}, TinySetup(2, 8, 2, 8)); });
  EXPECT_CONTAINS(message, "--policy: unknown offload policy 'lru'");
  EXPECT_CONTAINS(message,
                  "resident, on-demand, static-split, lru-prefetch, fiddler, fmoe, stream-all");
}

TEST(PolicyRegistry, NameAndHelpListsFollowRegistrationOrder) {
  const PolicyRegistry& registry = DefaultPolicyRegistry();
  EXPECT_EQ(registry.NameList().rfind("resident, on-demand, ", 0), 0u) << registry.NameList();
  const std::string help = registry.HelpList();
  EXPECT_EQ(static_cast<size_t>(std::count(help.begin(), help.end(), '\n')),
            registry.Names().size());
  EXPECT_NE(help.find("  fiddler       " + registry.Find("fiddler").summary + "\n"),
            std::string::npos)
      << help;
}

TEST(PolicyRegistry, RefusesOptionsThePolicyDoesNotTake) {
  PolicyOptions options;
  options.cache_per_layer = 2;
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("fiddler", options, TinySetup(2, 8, 2, 8)); }),
      "--cache-per-layer: policy 'fiddler' does not take it; it takes --staging-buffers");
  options = {};
  options.gpu_layers = 1;
  EXPECT_CONTAINS(ErrorOf([&] { MakeOffloadPolicy("on-demand", options, TinySetup(2, 8, 2, 8)); }),
                  "it takes no policy options");
  options = {};
  options.prefetch_distance = 2;
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("lru-prefetch", options, TinySetup(4, 8, 2, 8)); }),
      "it takes --cache-per-layer, --prefetch and --staging-buffers");
}

TEST(PolicyRegistry, DuplicateRegistrationIsAnError) {
  PolicyRegistry registry;
  RegisterOffloadPolicies(registry);
  EXPECT_CONTAINS(ErrorOf([&] { RegisterOffloadPolicies(registry); }), "registered twice");
}

TEST(OffloadSetup, ExpertSlotsSubtractDenseLayersAndStaging) {
  OffloadSetup setup = TinySetup(4, 8, 2, 10, 0);
  setup.fixed_bytes = 500;
  setup.dense_layer_bytes = {1000, 1000, 1000, 1000};
  // 10000 - 500 - 2 x 1000 - 1 x 1000 = 6500 -> 6 slots.
  EXPECT_EQ(setup.ExpertSlots(2, 1), 6);
  EXPECT_EQ(setup.ExpertSlots(4, 0), 5);
  EXPECT_EQ(setup.ExpertSlots(4, 9), 0);  // never negative
  EXPECT_LT(setup.ExpertBudgetBytes(4, 9), 0);
}

TEST(OffloadSetup, ValidateNamesTheField) {
  OffloadSetup setup = TinySetup(2, 8, 2, 8);
  setup.top_k = 9;
  EXPECT_CONTAINS(ErrorOf([&] { setup.Validate(); }), "field 'top_k'");
  setup = TinySetup(2, 8, 2, 8);
  setup.popularity = {{1, 2}};
  EXPECT_CONTAINS(ErrorOf([&] { setup.Validate(); }), "field 'popularity'");
  setup = TinySetup(2, 8, 2, 8);
  setup.latency.transfer_s = -1;
  EXPECT_CONTAINS(ErrorOf([&] { setup.Validate(); }), "every latency must be >= 0");
}

}  // namespace
}  // namespace moelab::policies
