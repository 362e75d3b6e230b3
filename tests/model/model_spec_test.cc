#include "model/model_spec.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/json_reader.h"
#include "model/preset_store.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

nlohmann::json Mixtral() {
  return base::JsonReader::ParseFile(testing::PresetDir() / "models/mixtral-8x7b.json");
}

// The error ModelSpecFromJson gives for `json` (read as "m.json").
std::string SpecErrorOf(const nlohmann::json& json) {
  return testing::ErrorOf([&] { ModelSpecFromJson(json, "m.json"); });
}

TEST(ModelSpec, RoundTripsThroughJson) {
  const MoeModelSpec spec = ModelSpecFromJson(Mixtral(), "m.json");
  const MoeModelSpec again = ModelSpecFromJson(ModelSpecToJson(spec), "again.json");
  EXPECT_EQ(ModelSpecToJson(spec), ModelSpecToJson(again));
}

TEST(ModelSpec, ImpossibleValuesAreRefusedNamingTheField) {
  nlohmann::json json = Mixtral();
  json["moe"]["top_k"] = 9;
  EXPECT_NE(SpecErrorOf(json).find(
                "m.json: field 'moe.top_k': must be between 1 and moe.num_experts (8), got 9"),
            std::string::npos)
      << SpecErrorOf(json);
  json = Mixtral();
  json["num_layers"] = 0;
  EXPECT_NE(SpecErrorOf(json).find("field 'num_layers': expected an integer >= 1, got 0"),
            std::string::npos)
      << SpecErrorOf(json);
  json = Mixtral();
  json["hidden_size"] = 4096.5;
  EXPECT_NE(SpecErrorOf(json).find("field 'hidden_size'"), std::string::npos);
  json = Mixtral();
  json["attention"]["num_kv_heads"] = 5;
  EXPECT_NE(SpecErrorOf(json).find("attention.num_kv_heads"), std::string::npos);
  json = Mixtral();
  json["norm"] = "batchnorm";
  EXPECT_NE(SpecErrorOf(json).find("field 'norm': expected one of \"rmsnorm\""), std::string::npos)
      << SpecErrorOf(json);
  json = Mixtral();
  json["bits"]["experts"] = -4;
  EXPECT_NE(SpecErrorOf(json).find("bits.experts"), std::string::npos);
  json = Mixtral();
  json.erase("hidden_size");
  EXPECT_NE(SpecErrorOf(json).find("missing required field 'hidden_size'"), std::string::npos);
  json = Mixtral();
  json["schema"] = "moelab.model/0";
  EXPECT_NE(SpecErrorOf(json).find("field 'schema'"), std::string::npos);
}

TEST(ModelSpec, MalformedFileNamesTheFile) {
  const std::filesystem::path dir = testing::MakeTempDir("model-spec");
  const std::filesystem::path file = dir / "broken.json";
  {
    std::ofstream out(file);
    out << "{\"schema\": \"moelab.model/1\", \"name\": ";
  }
  try {
    PresetStore(testing::PresetDir()).LoadModel(file.string());
    FAIL();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.json: malformed JSON"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(PresetStore(testing::PresetDir()).LoadModel((dir / "absent.json").string()),
               base::Error);
}

TEST(ModelSpec, DenseModelNeedsFfnWidth) {
  nlohmann::json json =
      base::JsonReader::ParseFile(testing::PresetDir() / "models/llama-3.2-1b.json");
  json["dense_intermediate_size"] = 0;
  EXPECT_NE(SpecErrorOf(json).find("dense_intermediate_size"), std::string::npos);
}

}  // namespace
}  // namespace moelab::model
