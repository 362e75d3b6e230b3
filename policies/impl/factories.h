#pragma once

#include <memory>
#include <vector>

#include "policies/offload_policy.h"

// Factories of the policies in policies/impl/, one per file; only registry.cc calls them.
namespace moelab::policies::impl {

// The options each policy takes (PolicyOptionSpec), declared in its file.
std::vector<PolicyOptionSpec> StaticSplitOptions();
std::vector<PolicyOptionSpec> LruPrefetchOptions();
std::vector<PolicyOptionSpec> FiddlerOptions();
std::vector<PolicyOptionSpec> FmoeOptions();

std::unique_ptr<OffloadPolicy> MakeResidentPolicy(const PolicyOptions& options,
                                                  const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeOnDemandPolicy(const PolicyOptions& options,
                                                  const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeStaticSplitPolicy(const PolicyOptions& options,
                                                     const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeLruPrefetchPolicy(const PolicyOptions& options,
                                                     const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeFiddlerPolicy(const PolicyOptions& options,
                                                 const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeStreamAllPolicy(const PolicyOptions& options,
                                                   const OffloadSetup& setup);
std::unique_ptr<OffloadPolicy> MakeFmoePolicy(const PolicyOptions& options,
                                              const OffloadSetup& setup);

}  // namespace moelab::policies::impl
