#include "model/profiled_model.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/executor_shape.h"
#include "model/preset_store.h"
#include "tests/support/error_of.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

using testing::ErrorOf;

ProfiledModel Q4Mixtral() {
  ProfiledModel m;
  m.origin = "profile.json";
  m.name = "mixtral-8x7b";
  m.family = "mixtral";
  m.shape = DefaultTargetShape();
  m.shape.layers = 4;
  m.shape.experts = 8;
  m.shape.top_k = 2;
  m.shape.vocab = 32000;
  m.shape.shared_experts = 0;
  m.expert_format = "q4_0";
  m.expert_stored_bits = 4.5;
  m.attention_format = "bf16";
  m.attention_stored_bits = 16.0;
  m.isa = "avx2";
  return m;
}

// What the profiler writes is what every reader gets back, and a fit's copy of it is unchanged.
TEST(ProfiledModel, RoundTripsThroughTheProfilesJson) {
  const ProfiledModel written = Q4Mixtral();
  const nlohmann::json json = written.ToJson();
  EXPECT_EQ(json["name"], "mixtral-8x7b");
  EXPECT_EQ(json["shape"]["layers"], 4);
  EXPECT_EQ(json["shape"]["expert_format"], "q4_0");
  EXPECT_FALSE(json.contains("isa"));  // the kernel path is the machine's
  const ProfiledModel read =
      ProfiledModel::FromJson(json, nlohmann::json{{"isa", "avx2"}}, "profile.json");
  EXPECT_EQ(read.ToJson(), json);
  EXPECT_EQ(read.name, written.name);
  EXPECT_EQ(read.shape.layers, 4);
  EXPECT_EQ(read.shape.hidden, 1024);
  EXPECT_FALSE(read.shape.dense_intermediate.has_value());
  EXPECT_EQ(read.ExpertStoredBits(), 4.5);
  EXPECT_EQ(read.isa, "avx2");
  EXPECT_FALSE(read.quantized_kernel.has_value());
  // Nothing recorded (a fit made in memory, or a profile from before the facts): nothing written,
  // and the formats are bf16.
  const ProfiledModel empty =
      ProfiledModel::FromJson(nlohmann::json::object(), nlohmann::json(), "old.json");
  EXPECT_EQ(empty.ToJson(), nlohmann::json::object());
  EXPECT_EQ(empty.ExpertFormat(), "bf16");
  EXPECT_EQ(empty.AttentionStoredBits(), 16.0);
}

TEST(ProfiledModel, RefusesMalformedFactsNamingFileAndField) {
  nlohmann::json json = Q4Mixtral().ToJson();
  json["shape"]["hidden"] = -1;
  EXPECT_EQ(ErrorOf([&] { ProfiledModel::FromJson(json, nullptr, "p.json"); }),
            "p.json: field 'model.shape.hidden' must be a non-negative integer");
  json = Q4Mixtral().ToJson();
  json["shape"]["expert_stored_bits"] = "4.5";
  EXPECT_EQ(ErrorOf([&] { ProfiledModel::FromJson(json, nullptr, "p.json"); }),
            "p.json: field 'model.shape.expert_stored_bits' must be a positive number of bits per "
            "weight");
}

// One check, one message: it names the file, the field, what was measured and what was wanted.
TEST(ProfiledModel, RequireRefusesAMismatchWithOneClearMessage) {
  const ProfiledModel measured = Q4Mixtral();
  ProfiledModel same;
  same.name = "mixtral-8x7b";
  same.shape.layers = 4;
  same.expert_stored_bits = 4;  // the bits --expert-bits names q4_0 by
  same.expert_format = "q4_0";
  same.isa = "avx2";
  EXPECT_NO_THROW(measured.Require(same, "test"));
  EXPECT_NO_THROW(measured.Require(ProfiledModel{}, "test"));  // nothing wanted

  ProfiledModel other_name;
  other_name.name = "qwen1.5-moe-a2.7b";
  EXPECT_EQ(ErrorOf([&] { measured.Require(other_name, "--model"); }),
            "profile.json: the profile measured 'mixtral-8x7b', not 'qwen1.5-moe-a2.7b' (--model): "
            "field 'model.name'; profile what is predicted (moelab profile with the same --model, "
            "shape options, --expert-bits and --attention-bits, on the kernel path that runs) or "
            "predict what it measured");
  ProfiledModel other_layers;
  other_layers.shape.layers = 8;
  EXPECT_NE(ErrorOf([&] { measured.Require(other_layers, "the target"); })
                .find("the profile measured layers 4, not 8 (the target): field "
                      "'model.shape.layers'"),
            std::string::npos);
  ProfiledModel bf16;
  bf16.expert_stored_bits = 16;
  EXPECT_NE(ErrorOf([&] { measured.Require(bf16, "x"); })
                .find("measured expert weights as q4_0 (4.5 bits per weight), not 16 bits (x): "
                      "field 'model.shape.expert_stored_bits'"),
            std::string::npos);
  ProfiledModel q8;
  q8.attention_format = "q8_0";
  EXPECT_NE(ErrorOf([&] { measured.Require(q8, "x"); })
                .find("measured attention weights as bf16 (16 bits per weight), not q8_0 (x): "
                      "field 'model.shape.attention_format'"),
            std::string::npos);
  ProfiledModel scalar;
  scalar.isa = "scalar";
  EXPECT_NE(ErrorOf([&] {
              measured.Require(scalar, "x");
            }).find("the avx2 kernels, not scalar (x): field 'machine.isa'"),
            std::string::npos);
}

// The spec a fitted profile prices: the preset at the recorded shape (the executor's default
// shape where the profile recorded nothing), in the recorded formats.
TEST(ProfiledModel, ExecutorSpecIsThePresetAtTheRecordedShapeAndFormats) {
  const PresetStore store(testing::PresetDir());
  const MoeModelSpec mixtral = store.LoadModel("mixtral-8x7b");
  const MoeModelSpec spec = Q4Mixtral().ExecutorSpec(mixtral);
  EXPECT_EQ(spec.num_layers, 4);
  EXPECT_EQ(spec.hidden_size, 1024);
  EXPECT_EQ(spec.moe->expert_intermediate_size, 3584);
  EXPECT_EQ(spec.bits.experts, 4.5);
  EXPECT_EQ(spec.bits.attention, 16.0);
  ProfiledModel unrecorded;
  const MoeModelSpec executor_default = unrecorded.ExecutorSpec(mixtral);
  EXPECT_EQ(executor_default.num_layers, 8);
  EXPECT_EQ(executor_default.bits.experts, 16.0);
  // ScaledSpec leaves a spec alone without overrides, and scales it through the same shape.
  EXPECT_EQ(ScaledSpec(mixtral, ShapeOverrides{}).num_layers, mixtral.num_layers);
  EXPECT_EQ(ScaledSpec(mixtral, DefaultTargetShape()).num_layers, 8);
}

}  // namespace
}  // namespace moelab::model
