#include "policies/policy_options.h"

#include "base/error.h"
#include "policies/offload_policy.h"

namespace moelab::policies {

const PolicyOptionField* FindPolicyOptionField(std::string_view name) {
  for (const PolicyOptionField& field : kPolicyOptionFields) {
    if (field.name == name) return &field;
  }
  return nullptr;
}

std::optional<int64_t> PolicyOptionSpec::Given(const PolicyOptions& options) const {
  const PolicyOptionField* field = FindPolicyOptionField(name);
  if (!field)
    throw base::Error("policy option '" + std::string(name) + "' is not a PolicyOptions field");
  return options.*(field->member);
}

std::optional<int64_t> PolicyOptionSpec::Resolve(const PolicyOptions& options,
                                                 const OffloadSetup& setup) const {
  const std::optional<int64_t> given = Given(options);
  const std::optional<int64_t> value = given ? given : default_value;
  if (!value) return std::nullopt;
  const std::string option = "--" + std::string(name);
  switch (maximum) {
    case OptionMaximum::kNone:
      if (*value < minimum) {
        throw base::Error(option + " must be at least " + std::to_string(minimum) + ", got " +
                          std::to_string(*value));
      }
      break;
    case OptionMaximum::kExpertsPerLayer:
    case OptionMaximum::kModelLayers: {
      const bool experts = maximum == OptionMaximum::kExpertsPerLayer;
      const int64_t most = experts ? setup.num_experts : setup.num_layers;
      if (*value < minimum || *value > most) {
        throw base::Error(option + " must be in [" + std::to_string(minimum) + ", " +
                          std::to_string(most) + "] (" +
                          (experts ? "experts per layer" : "the model's layers") + "), got " +
                          std::to_string(*value));
      }
      break;
    }
  }
  return value;
}

std::string PolicyOptionSpec::DefaultText() const {
  return default_value ? std::to_string(*default_value) : std::string(derived_default);
}

}  // namespace moelab::policies
