// moelab.model/1 files and model presets (model/model_spec), then parameter counts and expert
// bytes.
#include "fuzz/fuzz_support.h"
#include "model/model_spec.h"
#include "model/parameter_count.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    const moelab::MoeModelSpec spec = moelab::ModelSpecFromJson(json, "model.json");
    moelab::CountParameters(spec);
    moelab::CountWeightBytes(spec);
    if (spec.moe) moelab::ExpertBytes(spec);
  });
  return 0;
}
