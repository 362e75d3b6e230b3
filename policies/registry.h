#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policies/offload_policy.h"

namespace moelab::policies {

// Offload policies by name. Filled by one explicit function, RegisterOffloadPolicies (no
// static-initialization tricks); MakeOffloadPolicy looks names up in the default registry.

using PolicyFactory =
    std::function<std::unique_ptr<OffloadPolicy>(const PolicyOptions&, const OffloadSetup&)>;

struct PolicyInfo {
  std::string name;     // "lru-prefetch"
  std::string summary;  // one line for --help and docs
  // The PolicyOptions it takes, with its defaults, bounds and help (declared by the policy in
  // policies/impl/); any other option that is set is refused.
  std::vector<PolicyOptionSpec> options;
  PolicyFactory make;
  // It reads OffloadSetup::history (fMoE's map store starts from it). The simulator hands the
  // calibration's expert maps only to such a policy: copying 1024 maps into the setup and again
  // into the policy was a tenth of a batch-1 simulation of the others, which never read them.
  bool reads_history = false;
};

class PolicyRegistry {
 public:
  // Error when the name is taken, or when an option is not a PolicyOptions field
  // (kPolicyOptionFields) or is declared twice.
  void Add(PolicyInfo info);
  // Error for an unknown name, listing the valid ones.
  // Unknown names are refused naming `option`, the option the user gave the name in.
  const PolicyInfo& Find(const std::string& name, const std::string& option = "--policy") const;
  std::vector<std::string> Names() const;  // in registration order
  std::string NameList() const;            // "resident, on-demand, ...": for messages
  std::string HelpList() const;            // one "  name  summary" line per policy: for --help
  const std::vector<PolicyInfo>& All() const { return policies_; }

 private:
  std::vector<PolicyInfo> policies_;
};

// Registers every policy of policies/impl/: resident, on-demand, static-split, lru-prefetch,
// fiddler, fmoe, stream-all.
void RegisterOffloadPolicies(PolicyRegistry& registry);

// A command-line flag for one PolicyOptions field some policy takes, its help composed from
// every declaration ("lru-prefetch: device staging buffers ... (default 4); fiddler: ...").
struct PolicyOptionFlag {
  std::string name;  // without "--"
  std::optional<int64_t> PolicyOptions::*member;
  std::string help;
};
// In PolicyOptions order; fields no registered policy takes are left out.
std::vector<PolicyOptionFlag> PolicyOptionFlags(const PolicyRegistry& registry);

// The registry RegisterOffloadPolicies fills (built on first use).
const PolicyRegistry& DefaultPolicyRegistry();

// Finds `name`, refuses options it does not take ("policy 'fiddler' does not take
// --cache-per-layer; it takes --staging-buffers"), validates the setup and builds the policy.
// The policy's own constructor refuses impossible values (naming the option).
std::unique_ptr<OffloadPolicy> MakeOffloadPolicy(const std::string& name,
                                                 const PolicyOptions& options,
                                                 const OffloadSetup& setup);

}  // namespace moelab::policies
