// Hugging Face config.json import (model/hf_import), then the parameter counts of what it builds.
#include "fuzz/fuzz_support.h"
#include "model/hf_import.h"
#include "model/parameter_count.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    moelab::model::CountParameters(moelab::model::ImportHuggingFaceConfig(json, "config.json"));
  });
  return 0;
}
