#include "policies/registry.h"

#include <algorithm>
#include <random>
#include <string>
#include <string_view>
#include <vector>

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

// Every decision and prefetch of `passes` seeded random passes, as text (what the policy decided,
// for comparing two policies built from different setups).
std::string DecisionsOf(OffloadPolicy& policy, const OffloadSetup& setup, int passes) {
  std::mt19937 random(11);
  std::string text;
  for (const ExpertRef& ref : policy.InitialPlacement())
    text += "place " + std::to_string(ref.layer) + "/" + std::to_string(ref.expert) + "\n";
  const auto describe = [&](const LayerPlan& plan) {
    for (const ExpertDecision& d : plan.decisions) {
      text +=
          "decide " + std::to_string(d.expert) + " " + std::to_string(static_cast<int>(d.action)) +
          " " + std::to_string(static_cast<int>(d.target)) + " " + std::to_string(d.promote) + " " +
          (d.evict ? std::to_string(d.evict->layer) + "/" + std::to_string(d.evict->expert) : "-") +
          "\n";
    }
    for (const PrefetchRequest& r : plan.prefetches) {
      text +=
          "prefetch " + std::to_string(r.expert.layer) + "/" + std::to_string(r.expert.expert) +
          " " + std::to_string(static_cast<int>(r.target)) + " " +
          (r.evict ? std::to_string(r.evict->layer) + "/" + std::to_string(r.evict->expert) : "-") +
          " " + std::to_string(r.priority) + " " + std::to_string(r.urgent) + "\n";
    }
    for (const ExpertRef& ref : plan.discard_staged)
      text += "discard " + std::to_string(ref.layer) + "/" + std::to_string(ref.expert) + "\n";
  };
  // What the engine reads of the policy besides its plans.
  text += "slots " + std::to_string(policy.ExpertSlots()) + " staging " +
          std::to_string(policy.StagingBuffersUsed()) + " needs " +
          std::to_string(policy.Needs().gate_probabilities) +
          std::to_string(policy.Needs().next_layer_scores) + "\n";
  for (const auto& [name, value] : policy.ResolvedOptions())
    text += "option " + name + " " + std::to_string(value) + "\n";
  for (int64_t layer = 0; layer < setup.num_layers; ++layer)
    text += "dense " + std::to_string(static_cast<int>(policy.DenseDevice(layer))) + "\n";
  for (int pass = 0; pass < passes; ++pass) {
    IterationInfo info;
    info.index = pass;
    info.kind = "decode";
    info.tokens = 1;
    info.requests = {pass % 3};
    info.semantic = {static_cast<float>(pass % 3), 1.0f};
    LayerPlan plan;
    policy.BeginIteration(info, plan);
    describe(plan);
    for (int32_t layer = 0; layer < setup.num_moe_layers; ++layer) {
      std::vector<int32_t> experts(static_cast<size_t>(setup.num_experts));
      for (size_t e = 0; e < experts.size(); ++e) experts[e] = static_cast<int32_t>(e);
      std::shuffle(experts.begin(), experts.end(), random);
      experts.resize(static_cast<size_t>(setup.top_k));
      std::sort(experts.begin(), experts.end());
      std::vector<ExpertDemand> demanded;
      for (const int32_t e : experts) demanded.push_back({e, 1});
      std::vector<float> next(static_cast<size_t>(setup.num_experts));
      for (float& score : next) score = static_cast<float>(random() % 8) / 8.0f;
      std::vector<float> gate(static_cast<size_t>(setup.num_experts), 0.0f);
      for (const int32_t e : experts) gate[static_cast<size_t>(e)] = 0.5f;
      plan = testing::Plan(policy, testing::Demand(layer, demanded, next, gate));
      describe(plan);
    }
    policy.EndIteration();
  }
  const PolicyStats stats = policy.Stats();
  text += "stats " + std::to_string(stats.prefetches_issued) + " " +
          std::to_string(stats.searches) + " " + std::to_string(stats.map_store_size) + "\n";
  return text;
}

// The simulator hands the calibration's expert maps only to the policies registered as reading
// them (PolicyInfo::reads_history): every other policy decides the same with or without them, and
// the one that reads them (fMoE) decides differently, so a policy that starts reading them without
// saying so fails here.
void ExpectOnlyReadersDependOnHistory(const OffloadSetup& without) {
  OffloadSetup with = without;
  std::mt19937 random(5);
  for (int64_t request = 0; request < 6; ++request) {
    OffloadSetup::ExpertMap map;
    map.request = request;
    map.semantic = {static_cast<float>(request % 3), 1.0f};
    map.probabilities.assign(static_cast<size_t>(4 * 8), 0.0f);
    for (int64_t layer = 0; layer < 4; ++layer) {
      for (int k = 0; k < 2; ++k)
        map.probabilities[static_cast<size_t>(layer * 8 + static_cast<int64_t>(random() % 8))] +=
            0.5f;
    }
    with.history.push_back(map);
  }
  int readers = 0;
  for (const PolicyInfo& info : DefaultPolicyRegistry().All()) {
    // Its defaults, and every option it takes set one above its minimum (other code paths).
    std::vector<PolicyOptions> option_sets(1);
    PolicyOptions& raised = option_sets.emplace_back();
    for (const PolicyOptionSpec& spec : info.options) {
      const std::string_view name = spec.name;
      if (name == "cache-per-layer") raised.cache_per_layer = 1;
      if (name == "prefetch") raised.prefetch = 1;
      if (name == "gpu-layers") raised.gpu_layers = 1;
      if (name == "staging-buffers") raised.staging_buffers = 2;
      if (name == "prefetch-distance") raised.prefetch_distance = 1;
    }
    for (const PolicyOptions& options : option_sets) {
      const auto plain = MakeOffloadPolicy(info.name, options, without);
      const auto given = MakeOffloadPolicy(info.name, options, with);
      const std::string decided_without = DecisionsOf(*plain, without, 12);
      const std::string decided_with = DecisionsOf(*given, with, 12);
      if (info.reads_history) {
        EXPECT_NE(decided_with, decided_without) << info.name;
      } else {
        EXPECT_EQ(decided_with, decided_without) << info.name;
      }
    }
    readers += info.reads_history;
  }
  EXPECT_EQ(readers, 1);  // fMoE
}

TEST(PolicyRegistry, OnlyPoliciesThatSayTheyReadTheHistoryDependOnIt) {
  for (const bool with_popularity : {false, true}) {
    OffloadSetup without = TinySetup(4, 8, 2, 12, 4);
    if (with_popularity) {  // calibration counts, as the simulator's setups carry
      std::mt19937 counts(3);
      without.popularity.assign(4, std::vector<double>(8));
      for (auto& layer : without.popularity)
        for (double& count : layer) count = static_cast<double>(counts() % 16);
    }
    ExpectOnlyReadersDependOnHistory(without);
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
