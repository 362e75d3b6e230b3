#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/hf_import.h"
#include "base/json_reader.h"
#include "model/parameter_count.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

PresetStore Store() { return PresetStore(testing::PresetDir()); }

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const PresetEntry& entry : Store().ListModels()) names.push_back(entry.name);
  return names;
}

TEST(ModelPresets, AllRequiredPresetsExist) {
  const std::vector<std::string> names = ModelNames();
  const std::set<std::string> have(names.begin(), names.end());
  for (const char* required :
       {"mixtral-8x7b", "mixtral-8x22b", "qwen2-57b-a14b", "qwen1.5-moe-a2.7b", "qwen3-30b-a3b",
        "deepseek-v2", "deepseek-v2-lite", "deepseek-v3", "olmoe-1b-7b", "phi-3.5-moe", "dbrx",
        "gpt-oss-20b", "qwen2-0.5b", "opt-350m", "opt-30b", "llama-3.2-1b"}) {
    EXPECT_TRUE(have.count(required)) << required;
  }
}

class EveryModelPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryModelPreset, TotalParametersWithinTwoPercentOfPublished) {
  const MoeModelSpec spec = Store().LoadModel(GetParam());
  ASSERT_TRUE(spec.published.has_value()) << GetParam() << " has no published counts";
  const ParameterCounts counts = CountParameters(spec);
  const double deviation =
      static_cast<double>(counts.total) / static_cast<double>(spec.published->total_params) - 1.0;
  EXPECT_LT(std::fabs(deviation), 0.02) << GetParam() << ": computed " << counts.total
                                        << ", published " << spec.published->total_params;
  EXPECT_LE(counts.active, counts.total);
  if (!spec.moe) {
    EXPECT_EQ(counts.active, counts.total);
  }
}

TEST_P(EveryModelPreset, HuggingFaceConfigImportsToThePreset) {
  const std::filesystem::path config =
      testing::TestDataDir() / "hf_configs" / (GetParam() + ".json");
  ASSERT_TRUE(std::filesystem::exists(config)) << config;
  const MoeModelSpec preset = Store().LoadModel(GetParam());
  const MoeModelSpec imported = Store().LoadModel(config.string());  // detected as HF by model_type
  nlohmann::json a = ModelSpecToJson(preset);
  nlohmann::json b = ModelSpecToJson(imported);
  for (const char* identity : {"name", "display_name", "hf_repo", "published"}) {
    a.erase(identity);
    b.erase(identity);
  }
  EXPECT_EQ(a, b) << "preset:   " << a.dump() << "\nimported: " << b.dump();
  EXPECT_EQ(CountParameters(preset).total, CountParameters(imported).total);
}

INSTANTIATE_TEST_SUITE_P(Presets, EveryModelPreset, ::testing::ValuesIn(ModelNames()),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

TEST(ModelPresets, KnownArchitectureFacts) {
  const PresetStore store = Store();
  const MoeModelSpec mixtral = store.LoadModel("mixtral-8x7b");
  // One Mixtral expert: 3 x 4096 x 14336 bf16 weights = 352 MB (Fiddler: "over 300 MB").
  EXPECT_EQ(ExpertBytes(mixtral), 3LL * 4096 * 14336 * 2);
  EXPECT_EQ(KvCacheBytesPerToken(mixtral), 32LL * 2 * 8 * 128 * 2);
  const MoeModelSpec v2 = store.LoadModel("deepseek-v2");
  EXPECT_EQ(v2.attention.kind, AttentionKind::kMultiHeadLatent);
  EXPECT_EQ(KvCacheBytesPerToken(v2), 60LL * (512 + 64) * 2);  // compressed latent + rope key
  const MoeModelSpec gpt_oss = store.LoadModel("gpt-oss-20b");
  EXPECT_DOUBLE_EQ(gpt_oss.bits.experts, 4.25);  // MXFP4 experts shrink transfers
  EXPECT_LT(ExpertBytes(gpt_oss), CountParameters(gpt_oss).params_per_expert);
}

TEST(ModelPresets, UnknownNameSuggestsNearest) {
  try {
    Store().LoadModel("mixtral-8x8b");
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("unknown model preset 'mixtral-8x8b'"), std::string::npos) << message;
    EXPECT_NE(message.find("did you mean 'mixtral-8x7b'"), std::string::npos) << message;
  }
}

TEST(HardwarePresets, RequiredSlugsLoadWithPositiveNumbers) {
  const PresetStore store = Store();
  for (const char* name : {"t4",
                           "rtx-3060",
                           "rtx-3080-mobile",
                           "rtx-3090",
                           "rtx-4090",
                           "quadro-rtx-6000",
                           "rtx-a6000",
                           "rtx-6000-ada",
                           "l4",
                           "l40",
                           "l40s",
                           "a100-40gb-sxm",
                           "a100-40gb-pcie",
                           "a100-80gb-sxm",
                           "a100-80gb-pcie",
                           "a800-80gb",
                           "h100-sxm",
                           "h100-pcie",
                           "h800",
                           "h200"}) {
    const HardwareSpec spec = store.LoadHardware(name);
    ASSERT_TRUE(spec.has_accelerator()) << name;
    EXPECT_GT(spec.accelerator->memory_bytes, 4e9) << name;
    EXPECT_GT(spec.accelerator->memory_bandwidth_bytes_per_s, 1e11) << name;
    EXPECT_GT(PeakFlopsFor(spec.accelerator->peak_flops, "bf16", nullptr), 1e13) << name;
    ASSERT_TRUE(spec.host_link.has_value()) << name;
    ASSERT_TRUE(spec.host.has_value()) << name;
  }
  EXPECT_GE(store.ListHardware().size(), 20u);
}

TEST(HardwarePresets, EveryListedPresetLoads) {
  const PresetStore store = Store();
  for (const PresetEntry& entry : store.ListHardware()) {
    EXPECT_NO_THROW(store.LoadHardware(entry.name)) << entry.file;
  }
}

TEST(HardwarePresets, NodesComposeAccelerators) {
  const PresetStore store = Store();
  const HardwareSpec node = store.LoadHardware("8xh800");
  EXPECT_EQ(node.kind, HardwareKind::kNode);
  EXPECT_EQ(node.accelerator_count, 8);
  ASSERT_TRUE(node.interconnect.has_value());
  EXPECT_NEAR(node.interconnect->bandwidth_bytes_per_s, 2e11, 1e9);  // H800: 400 GB/s total
  const HardwareSpec composed = store.LoadHardware("2xa800-80gb");
  EXPECT_EQ(composed.accelerator_count, 2);
  // Any accelerator composes on the fly; a bridge-only card beyond two falls back to PCIe.
  const HardwareSpec three = store.LoadHardware("3xh100-sxm");
  EXPECT_EQ(three.accelerator_count, 3);
  const HardwareSpec four_3090 = store.LoadHardware("4xrtx-3090");
  EXPECT_EQ(four_3090.interconnect->kind, "pcie");
  EXPECT_THROW(store.LoadHardware("0xh100-sxm"), base::Error);
  try {
    store.LoadHardware("h100-sxn");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'h100-sxm'"), std::string::npos) << e.what();
  }
}

TEST(HardwarePresets, ComputeDeviceIsHostRoundTripsAndNeedsAHost) {
  const PresetStore store = Store();
  HardwareSpec hw = store.LoadHardware("a100-80gb-pcie");
  ASSERT_TRUE(hw.host.has_value());
  EXPECT_FALSE(hw.compute_device_is_host);
  EXPECT_FALSE(HardwareSpecToJson(hw).contains("compute_device_is_host"));
  hw.compute_device_is_host = true;
  const std::filesystem::path dir = testing::MakeTempDir("moelab-hardware");
  const auto load = [&](const nlohmann::json& json) {
    const std::filesystem::path path = dir / "hw.json";
    std::ofstream(path) << json.dump();
    return store.LoadHardware(path.string());
  };
  nlohmann::json json = HardwareSpecToJson(hw);
  EXPECT_TRUE(load(json).compute_device_is_host);
  // Its accelerator_count (1, as written) reads back; another count is refused, not read as 1.
  EXPECT_EQ(json["accelerator_count"], 1);
  json["accelerator_count"] = 8;
  try {
    load(json);
    ADD_FAILURE() << "accelerator_count 8 accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("field 'accelerator_count'"), std::string::npos)
        << e.what();
  }
  json["accelerator_count"] = 1;
  // The host's reads in flight: 1 unless the file says otherwise, at least 1.
  EXPECT_EQ(load(json).host->storage_reads_in_flight, 1);
  json["host"]["storage_reads_in_flight"] = 2;
  EXPECT_EQ(load(json).host->storage_reads_in_flight, 2);
  json["host"]["storage_reads_in_flight"] = 0;
  EXPECT_THROW(load(json), base::Error);
  json["host"]["storage_reads_in_flight"] = 2;
  // The read bandwidth beside computation: absent (and not written) unless set, then > 0.
  EXPECT_EQ(load(json).host->storage_read_bandwidth_beside_compute_bytes_per_s, 0);
  EXPECT_FALSE(json["host"].contains("storage_read_bandwidth_beside_compute_bytes_per_s"));
  hw.host->storage_read_bandwidth_beside_compute_bytes_per_s = 1e9;
  json = HardwareSpecToJson(hw);
  EXPECT_EQ(load(json).host->storage_read_bandwidth_beside_compute_bytes_per_s, 1e9);
  for (const double refused : {0.0, -1.0}) {
    json["host"]["storage_read_bandwidth_beside_compute_bytes_per_s"] = refused;
    try {
      load(json);
      FAIL() << refused;
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("storage_read_bandwidth_beside_compute_bytes_per_s"),
                std::string::npos)
          << e.what();
    }
  }
  json["host"]["storage_read_bandwidth_beside_compute_bytes_per_s"] = 1e9;
  // The computation's rate while reads are in flight: 1 (absent, not written) unless set, then a
  // fraction in (0, 1].
  EXPECT_EQ(load(json).host->compute_rate_while_storage_reads, 1);
  EXPECT_FALSE(json["host"].contains("compute_rate_while_storage_reads"));
  hw.host->compute_rate_while_storage_reads = 0.9;
  json = HardwareSpecToJson(hw);
  EXPECT_EQ(load(json).host->compute_rate_while_storage_reads, 0.9);
  for (const double refused : {0.0, -0.5, 1.5}) {
    json["host"]["compute_rate_while_storage_reads"] = refused;
    try {
      load(json);
      FAIL() << refused;
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("compute_rate_while_storage_reads"), std::string::npos)
          << e.what();
    }
  }
  json.erase("host");
  try {
    load(json);
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("compute_device_is_host"), std::string::npos) << e.what();
  }
}

TEST(HuggingFaceImport, RefusesUnknownModelTypeListingSupportedOnes) {
  const nlohmann::json config = {{"model_type", "mamba"}, {"hidden_size", 10}};
  try {
    ImportHuggingFaceConfig(config, "my/config.json");
    FAIL();
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("my/config.json: field 'model_type'"), std::string::npos) << message;
    EXPECT_NE(message.find("\"mixtral\""), std::string::npos) << message;
  }
}

TEST(HuggingFaceImport, MissingFieldIsNamed) {
  nlohmann::json config =
      base::JsonReader::ParseFile(testing::TestDataDir() / "hf_configs/mixtral-8x7b.json");
  config.erase("num_local_experts");
  try {
    ImportHuggingFaceConfig(config, "x/config.json");
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing required field 'num_local_experts'"),
              std::string::npos)
        << e.what();
  }
  config = base::JsonReader::ParseFile(testing::TestDataDir() / "hf_configs/mixtral-8x7b.json");
  // Bounds named by the config's own fields, not the spec's (moe.top_k, attention.num_kv_heads).
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, int>>{{"num_experts_per_tok", 9},  // K > E
                                                {"num_key_value_heads", 64}}) {
    nlohmann::json bad =
        base::JsonReader::ParseFile(testing::TestDataDir() / "hf_configs/mixtral-8x7b.json");
    bad[field] = value;
    try {
      ImportHuggingFaceConfig(bad, "x/config.json");
      ADD_FAILURE() << field;
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("field '" + field + "'"), std::string::npos) << e.what();
    }
  }
}

// A config's quantization_config sizes its weights whatever the family: a GPTQ or AWQ Mixtral was
// read as bf16 (93 GB) where its files hold about 24 GB.
TEST(HuggingFaceImport, QuantizationConfigAppliesToEveryFamily) {
  const nlohmann::json plain =
      base::JsonReader::ParseFile(testing::TestDataDir() / "hf_configs/mixtral-8x7b.json");
  const auto with = [&](const nlohmann::json& quantization) {
    nlohmann::json config = plain;
    config["quantization_config"] = quantization;
    return ImportHuggingFaceConfig(config, "x/config.json");
  };
  EXPECT_DOUBLE_EQ(ImportHuggingFaceConfig(plain, "x/config.json").bits.experts, 16);
  // 4 bits, an fp16 scale and a 4-bit zero per group of 128 rows.
  const MoeModelSpec gptq = with({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}});
  for (double bits : {gptq.bits.experts, gptq.bits.attention})
    EXPECT_DOUBLE_EQ(bits, 4 + 20.0 / 128);
  EXPECT_DOUBLE_EQ(gptq.bits.embeddings, 16);  // embeddings and the LM head stay unquantized
  EXPECT_DOUBLE_EQ(with({{"quant_method", "awq"}, {"bits", 4}}).bits.experts, 4 + 20.0 / 128);
  EXPECT_DOUBLE_EQ(with({{"quant_method", "gptq"}, {"bits", 8}, {"group_size", -1}}).bits.dense_ffn,
                   8);
  EXPECT_DOUBLE_EQ(with({{"quant_method", "fp8"}}).bits.experts, 8);
  for (const auto& [quantization, field] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{{"quant_method", "bitsandbytes"}}, "quantization_config.quant_method"},
           {{{"quant_method", "gptq"}, {"bits", 5}}, "quantization_config.bits"},
           {{{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 0}},
            "quantization_config.group_size"}}) {
    try {
      with(quantization);
      ADD_FAILURE() << quantization.dump();
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("field '" + field + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace moelab::model
