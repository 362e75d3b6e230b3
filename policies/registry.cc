#include "policies/registry.h"

#include <utility>

#include "base/error.h"
#include "policies/impl/factories.h"

namespace moelab::policies {
namespace {

std::string JoinOptions(const std::vector<PolicyOptionSpec>& options) {
  if (options.empty()) return "no policy options";
  std::string text;
  for (size_t i = 0; i < options.size(); ++i) {
    text += (i == 0 ? "--" : (i + 1 == options.size() ? " and --" : ", --")) +
            std::string(options[i].name);
  }
  return text;
}

const PolicyOptionSpec* FindOption(const PolicyInfo& info, std::string_view name) {
  for (const PolicyOptionSpec& option : info.options) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

}  // namespace

void PolicyRegistry::Add(PolicyInfo info) {
  for (const PolicyInfo& existing : policies_) {
    if (existing.name == info.name)
      throw base::Error("offload policy '" + info.name + "' registered twice");
  }
  for (size_t i = 0; i < info.options.size(); ++i) {
    const std::string option(info.options[i].name);
    if (!FindPolicyOptionField(option)) {
      throw base::Error("offload policy '" + info.name + "': option --" + option +
                        " is not a PolicyOptions field");
    }
    if (FindOption(info, option) != &info.options[i])
      throw base::Error("offload policy '" + info.name + "': option --" + option +
                        " declared twice");
  }
  policies_.push_back(std::move(info));
}

const PolicyInfo& PolicyRegistry::Find(const std::string& name, const std::string& option) const {
  for (const PolicyInfo& info : policies_) {
    if (info.name == name) return info;
  }
  std::string valid;
  for (const PolicyInfo& info : policies_) valid += (valid.empty() ? "" : ", ") + info.name;
  throw base::Error(option + ": unknown offload policy '" + name + "'; valid policies: " + valid);
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> names;
  for (const PolicyInfo& info : policies_) names.push_back(info.name);
  return names;
}

std::string PolicyRegistry::NameList() const {
  std::string names;
  for (const PolicyInfo& info : policies_) names += (names.empty() ? "" : ", ") + info.name;
  return names;
}

std::string PolicyRegistry::HelpList() const {
  std::string text;
  for (const PolicyInfo& info : policies_) {
    text += "  " + info.name + std::string(info.name.size() < 14 ? 14 - info.name.size() : 1, ' ') +
            info.summary + "\n";
  }
  return text;
}

void RegisterOffloadPolicies(PolicyRegistry& registry) {
  registry.Add({"resident",
                "every expert in accelerator memory (the ideal; memory limit ignored)",
                {},
                impl::MakeResidentPolicy});
  registry.Add({"on-demand",
                "fetch every missing expert when needed, LRU eviction over the whole cache "
                "(DeepSpeed-style)",
                {},
                impl::MakeOnDemandPolicy});
  registry.Add({"static-split",
                "the first L layers (dense parts and experts) on the accelerator, the rest on the "
                "CPU (llama.cpp -ngl)",
                impl::StaticSplitOptions(), impl::MakeStaticSplitPolicy});
  registry.Add({"lru-prefetch",
                "per-layer LRU cache of k experts plus speculative prefetch of the next layer's "
                "most likely experts into staging buffers (Mixtral-offloading)",
                impl::LruPrefetchOptions(), impl::MakeLruPrefetchPolicy});
  registry.Add({"fiddler",
                "popularity placement plus Algorithm 1 per expert: run resident, copy then run "
                "on the accelerator, or run on the CPU (Fiddler)",
                impl::FiddlerOptions(), impl::MakeFiddlerPolicy});
  registry.Add({"fmoe",
                "expert-map store with semantic and trajectory search, probability-mass prefetch "
                "d layers ahead, eviction by 1/(p freq) (fMoE)",
                impl::FmoeOptions(), impl::MakeFmoePolicy, /*reads_history=*/true});
  registry.Add({"stream-all",
                "every expert of every layer loaded for each pass, nothing kept (naive offloading, "
                "accelerate-style)",
                {},
                impl::MakeStreamAllPolicy});
}

std::vector<PolicyOptionFlag> PolicyOptionFlags(const PolicyRegistry& registry) {
  std::vector<PolicyOptionFlag> flags;
  for (const PolicyOptionField& field : kPolicyOptionFields) {
    std::string help;
    for (const PolicyInfo& info : registry.All()) {
      const PolicyOptionSpec* option = FindOption(info, field.name);
      if (!option) continue;
      help += (help.empty() ? "" : "; ") + info.name + ": " + std::string(option->help) +
              " (default " + option->DefaultText() + ")";
    }
    if (!help.empty()) flags.push_back({std::string(field.name), field.member, help});
  }
  return flags;
}

const PolicyRegistry& DefaultPolicyRegistry() {
  static const PolicyRegistry registry = [] {
    PolicyRegistry r;
    RegisterOffloadPolicies(r);
    return r;
  }();
  return registry;
}

std::unique_ptr<OffloadPolicy> MakeOffloadPolicy(const std::string& name,
                                                 const PolicyOptions& options,
                                                 const OffloadSetup& setup) {
  const PolicyInfo& info = DefaultPolicyRegistry().Find(name);
  for (const PolicyOptionField& field : kPolicyOptionFields) {
    if ((options.*field.member).has_value() && !FindOption(info, field.name)) {
      throw base::Error("--" + std::string(field.name) + ": policy '" + name +
                        "' does not take it; it takes " + JoinOptions(info.options));
    }
  }
  setup.Validate();
  return info.make(options, setup);
}

}  // namespace moelab::policies
