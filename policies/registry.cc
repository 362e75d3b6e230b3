#include "policies/registry.h"

#include <algorithm>
#include <utility>

#include "base/error.h"
#include "policies/impl/factories.h"

namespace moelab::policies {
namespace {

std::string JoinOptions(const std::vector<std::string>& options) {
  if (options.empty()) return "no policy options";
  std::string text;
  for (size_t i = 0; i < options.size(); ++i) {
    text += (i == 0 ? "--" : (i + 1 == options.size() ? " and --" : ", --")) + options[i];
  }
  return text;
}

}  // namespace

void PolicyRegistry::Add(PolicyInfo info) {
  for (const PolicyInfo& existing : policies_) {
    if (existing.name == info.name)
      throw Error("offload policy '" + info.name + "' registered twice");
  }
  policies_.push_back(std::move(info));
}

const PolicyInfo& PolicyRegistry::Find(const std::string& name) const {
  for (const PolicyInfo& info : policies_) {
    if (info.name == name) return info;
  }
  std::string valid;
  for (const PolicyInfo& info : policies_) valid += (valid.empty() ? "" : ", ") + info.name;
  throw Error("--policy: unknown offload policy '" + name + "'; valid policies: " + valid);
}

std::vector<std::string> PolicyRegistry::Names() const {
  std::vector<std::string> names;
  for (const PolicyInfo& info : policies_) names.push_back(info.name);
  return names;
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
                {"gpu-layers"},
                impl::MakeStaticSplitPolicy});
  registry.Add({"lru-prefetch",
                "per-layer LRU cache of k experts plus speculative prefetch of the next layer's "
                "most likely experts into staging buffers (Mixtral-offloading)",
                {"cache-per-layer", "prefetch", "staging-buffers"},
                impl::MakeLruPrefetchPolicy});
  registry.Add({"fiddler",
                "popularity placement plus Algorithm 1 per expert: run resident, copy then run "
                "on the accelerator, or run on the CPU (Fiddler)",
                {"staging-buffers"},
                impl::MakeFiddlerPolicy});
  registry.Add({"fmoe",
                "expert-map store with semantic and trajectory search, probability-mass prefetch "
                "d layers ahead, eviction by 1/(p freq) (fMoE)",
                {"prefetch-distance"},
                impl::MakeFmoePolicy});
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
  const std::pair<const char*, bool> given[] = {
      {"cache-per-layer", options.cache_per_layer.has_value()},
      {"prefetch", options.prefetch.has_value()},
      {"gpu-layers", options.gpu_layers.has_value()},
      {"staging-buffers", options.staging_buffers.has_value()},
      {"prefetch-distance", options.prefetch_distance.has_value()},
  };
  for (const auto& [option, set] : given) {
    if (set && std::find(info.options.begin(), info.options.end(), option) == info.options.end()) {
      throw Error("--" + std::string(option) + ": policy '" + name +
                  "' does not take it; it takes " + JoinOptions(info.options));
    }
  }
  setup.Validate();
  return info.make(options, setup);
}

}  // namespace moelab::policies
