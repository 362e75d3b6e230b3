#include "validate/impl/reused_profile.h"

#include "base/error.h"
#include "base/json_reader.h"
#include "kernels/cpu_features.h"
#include "kernels/weight_matrix.h"
#include "model/profiled_model.h"
#include "profiler/profiler.h"

namespace moelab::validate::impl {

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
  model::ProfiledModel running;
  running.expert_format = kernels::ToString(target.expert_format);
  running.attention_format = kernels::ToString(target.attention_format);
  running.isa = kernels::ToString(kernels::ActiveIsa());
  running.quantized_kernel = kernels::ToString(kernels::ActiveQuantizedKernel());
  model::ProfiledModel::FromJson(profile["model"], profile["machine"], path)
      .Require(running, "validate's runs here: --expert-bits, --attention-bits, MOELAB_ISA");
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
