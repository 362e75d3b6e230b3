#include "executor/hf_weights.h"

#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "executor/transformer.h"
#include "base/error.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/test_paths.h"
#include "weights/safetensors.h"
#include "tests/support/error_of.h"

namespace moelab::executor {
namespace {

using testing::ErrorOf;

std::vector<float> Logits(const ModelWeights& weights, kernels::ThreadPool& pool) {
  Transformer model(weights, pool);
  KvCache cache(weights.config, 16);
  std::vector<SequenceInput> batch = {{&cache, {1, 4, 9, 16}}};
  std::vector<float> logits;
  model.Forward(batch, {LogitRows::kAll, nullptr, nullptr, "test"}, logits);
  return logits;
}

class HuggingFaceWeights : public ::testing::TestWithParam<ExecutorConfig> {};

TEST_P(HuggingFaceWeights, SavedFileLoadsBackToTheSameModel) {
  kernels::ThreadPool pool(2);
  const ModelWeights original = MakeSyntheticWeights(GetParam(), 17, pool);
  const auto dir = testing::MakeTempDir("hf-weights");
  SaveHuggingFaceWeights(original, dir / "model.safetensors");
  const ModelWeights loaded =
      LoadHuggingFaceWeights(GetParam(), dir);  // a folder with model.safetensors
  EXPECT_EQ(Logits(original, pool), Logits(loaded, pool));
  EXPECT_DOUBLE_EQ(original.TotalBytes(), loaded.TotalBytes());
  EXPECT_DOUBLE_EQ(WeightBytesFor(GetParam()),
                   original.TotalBytes());  // the pre-allocation estimate is exact
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, HuggingFaceWeights,
                         ::testing::Values(testing::TinyMixtral(), testing::TinyQwenMoe(),
                                           testing::TinyQwen3Moe(), testing::TinyLlama()),
                         testing::TinyModelName());

TEST(HuggingFaceWeightsErrors, UseTheFamiliesTensorNames) {
  kernels::ThreadPool pool(1);
  const auto dir = testing::MakeTempDir("hf-names");
  SaveHuggingFaceWeights(MakeSyntheticWeights(testing::TinyMixtral(), 1, pool),
                         dir / "m.safetensors");
  const weights::SafetensorsFile file = weights::SafetensorsFile::Open(dir / "m.safetensors");
  EXPECT_TRUE(file.Has("model.layers.1.block_sparse_moe.experts.5.w2.weight"));
  EXPECT_TRUE(file.Has("model.layers.0.block_sparse_moe.gate.weight"));
  EXPECT_EQ(file.Info("model.layers.0.block_sparse_moe.experts.0.w1.weight").shape,
            (std::vector<int64_t>{40, 48}));
  SaveHuggingFaceWeights(MakeSyntheticWeights(testing::TinyQwenMoe(), 1, pool),
                         dir / "q.safetensors");
  const weights::SafetensorsFile qwen = weights::SafetensorsFile::Open(dir / "q.safetensors");
  EXPECT_TRUE(qwen.Has("model.layers.2.mlp.shared_expert_gate.weight"));
  EXPECT_TRUE(qwen.Has("model.layers.0.mlp.down_proj.weight"));  // the dense first layer
  EXPECT_TRUE(qwen.Has("model.layers.1.self_attn.q_proj.bias"));
  std::filesystem::remove_all(dir);
}

TEST(HuggingFaceWeightsErrors, MismatchedMissingAndCorruptFilesNameTheTensor) {
  kernels::ThreadPool pool(1);
  const auto dir = testing::MakeTempDir("hf-bad");
  const auto file = dir / "model.safetensors";
  SaveHuggingFaceWeights(MakeSyntheticWeights(testing::TinyMixtral(), 1, pool), file);

  ExecutorConfig wider = testing::TinyMixtral();
  wider.expert_intermediate_size = 44;
  std::string message = ErrorOf([&] { LoadHuggingFaceWeights(wider, file); });
  EXPECT_NE(message.find(
                "model.safetensors: tensor 'model.layers.0.block_sparse_moe.experts.0.w1.weight': "
                "expected shape [44, 48], file has [40, 48]"),
            std::string::npos)
      << message;

  ExecutorConfig more_experts = testing::TinyMixtral();
  more_experts.num_experts = 7;
  message = ErrorOf([&] { LoadHuggingFaceWeights(more_experts, file); });
  EXPECT_NE(message.find("tensor 'model.layers.0.block_sparse_moe.gate.weight'"), std::string::npos)
      << message;

  // A file written without one expert's down projection.
  {
    const weights::SafetensorsFile full = weights::SafetensorsFile::Open(file);
    weights::SafetensorsWriter partial;
    for (const std::string& name : full.Names()) {
      if (name == "model.layers.1.block_sparse_moe.experts.3.w2.weight") continue;
      const weights::TensorInfo& info = full.Info(name);
      std::vector<float> values(static_cast<size_t>(info.element_count()));
      full.ReadF32(name, info.shape, values.data());
      if (info.dtype == weights::TensorDtype::kF32) {
        partial.Add(name, weights::TensorDtype::kF32, info.shape, values.data());
      } else {
        partial.AddBf16FromFloat(name, info.shape, values.data());
      }
    }
    partial.Write(dir / "partial.safetensors");
  }
  message =
      ErrorOf([&] { LoadHuggingFaceWeights(testing::TinyMixtral(), dir / "partial.safetensors"); });
  EXPECT_NE(message.find("tensor 'model.layers.1.block_sparse_moe.experts.3.w2.weight' not found"),
            std::string::npos)
      << message;

  // Truncated: the file is cut in the middle of its data.
  std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
  message = ErrorOf([&] { LoadHuggingFaceWeights(testing::TinyMixtral(), file); });
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
  EXPECT_NE(message.find("tensor '"), std::string::npos) << message;

  ExecutorConfig unsupported = testing::TinyMixtral();
  unsupported.family = "dbrx";
  EXPECT_NE(ErrorOf([&] {
              LoadHuggingFaceWeights(unsupported, file);
            }).find("no safetensors tensor names for family 'dbrx'"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::executor
