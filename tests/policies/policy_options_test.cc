#include "policies/policy_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "policies/registry.h"
#include "tests/policies/policy_test_util.h"

namespace moelab::policies {
namespace {

using testing::ErrorOf;
using testing::TinySetup;

const PolicyOptionSpec& OptionOf(const std::string& policy, std::string_view name) {
  for (const PolicyOptionSpec& option : DefaultPolicyRegistry().Find(policy).options) {
    if (option.name == name) return option;
  }
  throw base::Error("no option " + std::string(name) + " in " + policy);
}

TEST(PolicyOptionSpec, EachPolicyDeclaresItsDefaultsAndBounds) {
  EXPECT_EQ(OptionOf("lru-prefetch", "prefetch").default_value, 2);
  EXPECT_EQ(OptionOf("lru-prefetch", "prefetch").minimum, 0);
  EXPECT_EQ(OptionOf("lru-prefetch", "staging-buffers").default_value, 4);
  EXPECT_EQ(OptionOf("lru-prefetch", "staging-buffers").minimum, 0);
  EXPECT_EQ(OptionOf("fiddler", "staging-buffers").default_value, 1);
  EXPECT_EQ(OptionOf("fiddler", "staging-buffers").minimum, 1);
  EXPECT_EQ(OptionOf("fmoe", "prefetch-distance").default_value, 3);
  EXPECT_EQ(OptionOf("fmoe", "prefetch-distance").minimum, 1);
  // Derived from the setup: no fixed default, a model-dependent maximum.
  EXPECT_FALSE(OptionOf("lru-prefetch", "cache-per-layer").default_value);
  EXPECT_EQ(OptionOf("lru-prefetch", "cache-per-layer").maximum, OptionMaximum::kExpertsPerLayer);
  EXPECT_FALSE(OptionOf("static-split", "gpu-layers").default_value);
  EXPECT_EQ(OptionOf("static-split", "gpu-layers").maximum, OptionMaximum::kModelLayers);
  EXPECT_TRUE(DefaultPolicyRegistry().Find("resident").options.empty());
  EXPECT_TRUE(DefaultPolicyRegistry().Find("on-demand").options.empty());
}

TEST(PolicyOptionSpec, ResolveGivesTheValueOrTheDefaultWithinBounds) {
  const OffloadSetup setup = TinySetup(4, 8, 2, 16, 4);
  PolicyOptions options;
  const PolicyOptionSpec& prefetch = OptionOf("lru-prefetch", "prefetch");
  EXPECT_EQ(prefetch.Resolve(options, setup), 2);
  options.prefetch = 5;
  EXPECT_EQ(prefetch.Resolve(options, setup), 5);
  options.prefetch = -1;
  EXPECT_EQ(ErrorOf([&] { prefetch.Resolve(options, setup); }),
            "--prefetch must be at least 0, got -1");
  const PolicyOptionSpec& cache = OptionOf("lru-prefetch", "cache-per-layer");
  EXPECT_FALSE(cache.Resolve(options, setup));  // the policy derives it
  options.cache_per_layer = 9;
  EXPECT_EQ(ErrorOf([&] { cache.Resolve(options, setup); }),
            "--cache-per-layer must be in [1, 8] (experts per layer), got 9");
  options.cache_per_layer = 0;
  EXPECT_CONTAINS(ErrorOf([&] { cache.Resolve(options, setup); }), "must be in [1, 8]");
  options.gpu_layers = 5;
  EXPECT_EQ(ErrorOf([&] { OptionOf("static-split", "gpu-layers").Resolve(options, setup); }),
            "--gpu-layers must be in [0, 4] (the model's layers), got 5");
}

TEST(PolicyOptionFlags, OneFlagPerFieldWithEveryPolicysHelp) {
  const std::vector<PolicyOptionFlag> flags = PolicyOptionFlags(DefaultPolicyRegistry());
  std::vector<std::string> names;
  for (const PolicyOptionFlag& flag : flags) names.push_back(flag.name);
  // Every PolicyOptions field is taken by some policy, so each has its flag, in field order.
  EXPECT_EQ(names, (std::vector<std::string>{"cache-per-layer", "prefetch", "gpu-layers",
                                             "staging-buffers", "prefetch-distance"}));
  const PolicyOptionFlag& staging = flags[3];
  EXPECT_EQ(staging.member, &PolicyOptions::staging_buffers);
  EXPECT_CONTAINS(staging.help, "lru-prefetch: ");
  EXPECT_CONTAINS(staging.help, "(default 4); fiddler: ");
  EXPECT_CONTAINS(staging.help, "(default 1)");
  EXPECT_CONTAINS(flags[0].help, "(default memory / layers, at most E)");
}

TEST(PolicyRegistry, RefusesUndeclaredAndDuplicateOptions) {
  PolicyRegistry registry;
  PolicyInfo info{"p", "test", {}, nullptr};
  info.options.push_back({"cache-size", 1, "", 0, OptionMaximum::kNone, "?"});
  EXPECT_EQ(ErrorOf([&] { registry.Add(info); }),
            "offload policy 'p': option --cache-size is not a PolicyOptions field");
  info.options = {{"prefetch", 1, "", 0, OptionMaximum::kNone, "?"},
                  {"prefetch", 2, "", 0, OptionMaximum::kNone, "?"}};
  EXPECT_EQ(ErrorOf([&] { registry.Add(info); }),
            "offload policy 'p': option --prefetch declared twice");
}

TEST(PolicyRegistry, RefusesTheFirstUndeclaredOptionInFieldOrder) {
  PolicyOptions options;
  options.prefetch_distance = 2;
  options.cache_per_layer = 2;
  EXPECT_CONTAINS(
      ErrorOf([&] { MakeOffloadPolicy("static-split", options, TinySetup(2, 8, 2, 8)); }),
      "--cache-per-layer: policy 'static-split' does not take it; it takes --gpu-layers");
}

}  // namespace
}  // namespace moelab::policies
