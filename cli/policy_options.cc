#include "cli/policy_options.h"

#include "base/error.h"

namespace moelab::cli {

void AddPolicyOptions(po::options_description& options, policies::PolicyOptions& target) {
  for (const policies::PolicyOptionFlag& flag :
       policies::PolicyOptionFlags(policies::DefaultPolicyRegistry())) {
    const auto member = flag.member;
    options.add_options()(flag.name.c_str(),
                          po::value<int64_t>()->notifier(
                              [&target, member](int64_t value) { target.*member = value; }),
                          flag.help.c_str());
  }
}

std::string PolicyOptionsUsage() {
  std::string flags;
  for (const policies::PolicyOptionFlag& flag :
       policies::PolicyOptionFlags(policies::DefaultPolicyRegistry()))
    flags += (flags.empty() ? "--" : " --") + flag.name + " N";
  return flags;
}

void RefuseUnusedPolicyOptions(const po::variables_map& values, const std::string& why) {
  for (const policies::PolicyOptionFlag& flag :
       policies::PolicyOptionFlags(policies::DefaultPolicyRegistry())) {
    if (values.count(flag.name))
      throw base::Error("--" + flag.name + " is a policy option: " + why);
  }
}

}  // namespace moelab::cli
