#include "validate/impl/reused_profile.h"

#include <utility>

#include "base/error.h"
#include "base/json_reader.h"
#include "kernels/cpu_features.h"
#include "kernels/weight_matrix.h"
#include "profiler/profiler.h"

namespace moelab::validate::impl {

std::optional<std::string> ProfiledKernelPath(const nlohmann::json& profile,
                                              const std::string& field) {
  const nlohmann::json& machine = profile["machine"];
  if (!machine.contains(field) || !machine[field].is_string()) return std::nullopt;
  return machine[field].get<std::string>();
}

std::string ProfiledWeightFormat(const nlohmann::json& profile, const std::string& part) {
  const nlohmann::json& shape = profile["model"]["shape"];
  const std::string field = part + "_format";
  return shape.contains(field) && shape[field].is_string() ? shape[field].get<std::string>()
                                                           : std::string("bf16");
}

std::set<std::string> ProfiledGpuOperators(const nlohmann::json& profile) {
  std::set<std::string> measured;
  for (const nlohmann::json& sample : profile["samples"]) {
    if (sample.value("device", std::string()) == "cuda:0")
      measured.insert(sample.value("operator", std::string()));
  }
  return measured;
}

void RequireProfiledFormats(const nlohmann::json& profile, const std::string& path,
                            const executor::ExecutorConfig& target) {
  const std::pair<const char*, std::string> paths[] = {
      {"isa", kernels::ToString(kernels::ActiveIsa())},
      {"quantized_kernel", kernels::ToString(kernels::ActiveQuantizedKernel())}};
  for (const auto& [field, running] : paths) {
    const std::optional<std::string> profiled = ProfiledKernelPath(profile, field);
    if (profiled && *profiled != running) {
      throw base::Error(path + ": field 'machine." + field + "' is " + *profiled +
                        " but the kernels run " + running +
                        " here (MOELAB_ISA): profile on the path validate runs");
    }
  }
  const std::pair<const char*, kernels::WeightFormat> parts[] = {
      {"expert", target.expert_format}, {"attention", target.attention_format}};
  for (const auto& [part, format] : parts) {
    const std::string field = std::string(part) + "_format";
    const std::string profiled = ProfiledWeightFormat(profile, part);
    if (profiled != kernels::ToString(format)) {
      throw base::Error(path + ": field 'model.shape." + field + "' is " + profiled +
                        " but validate runs " + part + " weights as " + kernels::ToString(format) +
                        " (--" + part + "-bits): profile with the same formats");
    }
  }
}

void RequireGpuSamples(const nlohmann::json& profile, const std::string& path) {
  const std::set<std::string> measured = ProfiledGpuOperators(profile);
  for (const char* op : {"attention_decode", "expert_ffn", "router", "lm_head", "dense_ffn"}) {
    if (!measured.count(op)) {
      throw base::Error(path + ": --device gpu needs the profile's " + op +
                        " samples on cuda:0 (a profile taken where the GPU was measured through "
                        "the executor's backend); it has none");
    }
  }
}

nlohmann::json ReadReusedProfile(const std::string& path, const executor::ExecutorConfig& target) {
  nlohmann::json profile = base::JsonReader::ParseFile(path);
  profiler::ValidateProfile(profile);
  RequireProfiledFormats(profile, path, target);
  return profile;
}

void RequireReusedGpuProfile(const std::string& path) {
  const nlohmann::json reused = base::JsonReader::ParseFile(path);
  profiler::ValidateProfile(reused);
  RequireGpuSamples(reused, path);
}

}  // namespace moelab::validate::impl
