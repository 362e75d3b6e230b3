#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace moelab::policies {

struct OffloadSetup;

// Policy options from the command line; a policy refuses options it does not take (by name).
// Each field is named once, in kPolicyOptionFields below; what it means to a policy (default,
// bounds, help) is declared once, by that policy (PolicyOptionSpec, in policies/impl/).
struct PolicyOptions {
  std::optional<int64_t> cache_per_layer;    // --cache-per-layer K (lru-prefetch)
  std::optional<int64_t> prefetch;           // --prefetch N (lru-prefetch)
  std::optional<int64_t> gpu_layers;         // --gpu-layers L (static-split)
  std::optional<int64_t> staging_buffers;    // --staging-buffers B (lru-prefetch, fiddler)
  std::optional<int64_t> prefetch_distance;  // --prefetch-distance D (fmoe)
};

// A PolicyOptions field by its command-line name (without "--").
struct PolicyOptionField {
  std::string_view name;
  std::optional<int64_t> PolicyOptions::*member;
};

// Every PolicyOptions field, in declaration order (the order options are refused in).
inline constexpr PolicyOptionField kPolicyOptionFields[] = {
    {"cache-per-layer", &PolicyOptions::cache_per_layer},
    {"prefetch", &PolicyOptions::prefetch},
    {"gpu-layers", &PolicyOptions::gpu_layers},
    {"staging-buffers", &PolicyOptions::staging_buffers},
    {"prefetch-distance", &PolicyOptions::prefetch_distance},
};

// The field named `name`, or nullptr.
const PolicyOptionField* FindPolicyOptionField(std::string_view name);

// An upper bound that depends on the model, known once the setup is.
enum class OptionMaximum {
  kNone,
  kExpertsPerLayer,  // OffloadSetup::num_experts
  kModelLayers,      // OffloadSetup::num_layers (transformer layers)
};

// One option a policy takes, as data: the policy's declaration of it, read by the registry (which
// refuses what a policy does not declare), the CLI (which builds its flags and help from them)
// and the policy itself (Resolve).
struct PolicyOptionSpec {
  std::string_view name;                 // a kPolicyOptionFields name: "staging-buffers"
  std::optional<int64_t> default_value;  // unset: the policy derives it from the setup
  std::string_view derived_default;      // how, when default_value is unset: "memory / layers"
  int64_t minimum = 0;
  OptionMaximum maximum = OptionMaximum::kNone;
  std::string_view help;  // what it sets, for --help

  // The value given in `options` (nullopt when unset).
  std::optional<int64_t> Given(const PolicyOptions& options) const;
  // The value given, else the default (nullopt when neither: the policy derives it). Error naming
  // the option when out of bounds: "--NAME must be at least MIN, got V", or with a maximum
  // "--NAME must be in [MIN, MAX] (experts per layer), got V".
  std::optional<int64_t> Resolve(const PolicyOptions& options, const OffloadSetup& setup) const;
  // "4", or the derived default ("memory / layers").
  std::string DefaultText() const;
};

}  // namespace moelab::policies
