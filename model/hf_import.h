#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model_spec.h"

namespace moelab::model {

// Builds a MoeModelSpec from a Hugging Face config.json. Supported model_type values (one
// importer each, registered in hf_import.cc): mixtral, qwen2_moe, qwen3_moe, deepseek_v2,
// deepseek_v3, olmoe, phimoe, dbrx, gpt_oss, llama, qwen2, opt. Conventions (docs/model.md):
// - weights are planned at 16 bits unless quantization_config says fp8 (8 bits for all linear
//   layers but embeddings/router) or mxfp4 (4.25 bits for experts: 4-bit values plus one 8-bit
//   scale per 32);
// - a sliding window counts only when enabled and shorter than max_position_embeddings (a window
//   at least as long as the longest context never binds);
// - DeepSeek-V3's multi-token-prediction layers are not part of the model.
// `origin` names the file in error messages; the spec's name is the file's stem.
MoeModelSpec ImportHuggingFaceConfig(const nlohmann::json& config, const std::string& origin);

std::vector<std::string> SupportedHuggingFaceModelTypes();

}  // namespace moelab::model
