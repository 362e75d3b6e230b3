// moelab.model/1 files and model presets (model/model_spec), then parameter counts and expert
// bytes.
#include "fuzz/fuzz_support.h"
#include "model/model_spec.h"
#include "model/parameter_count.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    const moelab::model::MoeModelSpec spec = moelab::model::ModelSpecFromJson(json, "model.json");
    moelab::model::CountParameters(spec);
    moelab::model::CountWeightBytes(spec);
    if (spec.moe) moelab::model::ExpertBytes(spec);
  });
  return 0;
}
