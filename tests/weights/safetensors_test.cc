#include "weights/safetensors.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/support/test_paths.h"
#include "kernels/bf16.h"
#include "tests/support/error_of.h"

namespace moelab::weights {
namespace {

namespace fs = std::filesystem;
using testing::ErrorOf;

// The message of the Error `action` throws; "" (and a test failure) when it throws none.

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<char> ReadBytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const fs::path& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void WriteText(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::trunc);
  out << text;
}

// A hand-made safetensors file: the 8-byte little-endian length, `header` verbatim, then
// `data_bytes` zero bytes.
void WriteRaw(const fs::path& file, const std::string& header, size_t data_bytes) {
  std::vector<char> bytes(8);
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(length >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data_bytes, 0);
  WriteBytes(file, bytes);
}

std::string OpenError(const fs::path& file) {
  return ErrorOf([&] { SafetensorsFile::Open(file); });
}

uint16_t Bits(float value) { return kernels::FloatToBf16(value); }
float FromBits(uint32_t bits) { return std::bit_cast<float>(bits); }

// ----- bf16 / fp16 conversions -----

TEST(Bf16, RoundsToNearestTiesToEven) {
  EXPECT_EQ(Bits(1.0f), 0x3f80);
  EXPECT_EQ(Bits(-2.0f), 0xc000);
  EXPECT_EQ(Bits(0.0f), 0x0000);
  EXPECT_EQ(Bits(-0.0f), 0x8000);
  // 1 + 2^-8 lies halfway between 0x3f80 (even) and 0x3f81: ties go to the even one.
  EXPECT_EQ(Bits(FromBits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82 (even).
  EXPECT_EQ(Bits(FromBits(0x3f818000u)), 0x3f82);
  // Just above and below halfway.
  EXPECT_EQ(Bits(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(Bits(FromBits(0x3f807fffu)), 0x3f80);
  EXPECT_EQ(Bits(FromBits(0xbf808000u)), 0xbf80);
  EXPECT_EQ(Bits(FromBits(0xbf818000u)), 0xbf82);
  // A carry out of the mantissa bumps the exponent: 0x3fffffff rounds up to 2.0.
  EXPECT_EQ(Bits(FromBits(0x3fffffffu)), 0x4000);
  // Subnormals round the same way.
  EXPECT_EQ(Bits(FromBits(0x00018000u)), 0x0002);
  EXPECT_EQ(Bits(FromBits(0x00008000u)), 0x0000);
}

TEST(Bf16, InfinityNanAndMaxFinite) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Bits(inf), 0x7f80);
  EXPECT_EQ(Bits(-inf), 0xff80);
  // The largest bf16 (0x7f7f) is exact; anything at or past half an ulp above it is infinity.
  EXPECT_EQ(Bits(kernels::Bf16ToFloat(0x7f7f)), 0x7f7f);
  EXPECT_FLOAT_EQ(kernels::Bf16ToFloat(0x7f7f), 3.38953139e38f);
  EXPECT_EQ(Bits(FromBits(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(Bits(FromBits(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(Bits(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(Bits(-std::numeric_limits<float>::max()), 0xff80);
  // NaNs stay NaN, including those whose payload sits only in the dropped low bits (which a naive
  // rounding would turn into infinity), and keep their sign.
  for (const uint32_t nan_bits :
       {0x7fc00000u, 0x7f800001u, 0x7f80ffffu, 0xffc00000u, 0xff800001u}) {
    const uint16_t bf16 = Bits(FromBits(nan_bits));
    EXPECT_TRUE(std::isnan(kernels::Bf16ToFloat(bf16))) << std::hex << nan_bits << " -> " << bf16;
    EXPECT_EQ(bf16 & 0x8000, (nan_bits >> 16) & 0x8000);
  }
}

TEST(Bf16, EveryNonNanBf16RoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t bf16 = static_cast<uint16_t>(bits);
    const float value = kernels::Bf16ToFloat(bf16);
    if (std::isnan(value)) continue;
    ASSERT_EQ(kernels::FloatToBf16(value), bf16) << std::hex << bits;
    ASSERT_EQ(std::bit_cast<uint32_t>(value), bits << 16);
  }
}

// ----- round trips -----

TEST(Safetensors, WritesAndReadsBf16F16F32WithOddShapes) {
  const fs::path dir = testing::MakeTempDir("safetensors-roundtrip");
  const fs::path file = dir / "w.safetensors";

  // F32 values of shape [3, 5] chosen to exercise rounding: ties, near-ties, tiny, huge, negative.
  const float tie_down = FromBits(0x3f808000u);   // 1 + 2^-8: halfway, rounds to even 0x3f80
  const float tie_up = FromBits(0x3f818000u);     // 1 + 3 * 2^-8: halfway, rounds to even 0x3f82
  const float above_tie = FromBits(0x3f808001u);  // just above halfway: 0x3f81
  const std::vector<float> f32 = {1.0f,    tie_down,    tie_up, -3.14159265f, 1e-30f,
                                  6.5e37f, 0.1f,        -0.0f,  above_tie,    65504.0f,
                                  -1e-3f,  123456.789f, 2.5f,   7.0f,         -8.25f};
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x3555, 0x7bff, 0x0001, 0x03ff, 0x8000};
  const std::vector<float> f16_values = {
      1.0f, -2.0f, 0.333251953125f, 65504.0f, std::ldexp(1.0f, -24), std::ldexp(1023.0f, -24),
      -0.0f};  // shape [7, 1]
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc049, 0x0001, 0x7f7f, 0xff7f, 0x4000,
                                      0x3e80, 0x8000, 0x7f80, 0x1234, 0xabcd, 0x3c00,
                                      0x4120, 0x42c8, 0xc2c8, 0x0080, 0x4f00, 0x5f00,
                                      0x3dcd, 0x3e4d, 0x3e9a};  // shape [3, 1, 7]
  const std::vector<float> from_floats = {0.1f, 0.2f, 0.3f, -1e20f, 1e-20f};
  const float scalar = 42.5f;

  SafetensorsWriter writer;
  writer.Add("model.layers.0.mlp.gate.weight", TensorDtype::kF32, {3, 5}, f32.data());
  writer.Add("half", TensorDtype::kF16, {7, 1}, f16.data());
  writer.Add("brain", TensorDtype::kBf16, {3, 1, 7}, bf16.data());
  writer.Add("scalar", TensorDtype::kF32, {}, &scalar);
  writer.Add("empty", TensorDtype::kBf16, {0, 5}, nullptr);
  writer.AddBf16FromFloat("converted", {5}, from_floats.data());
  writer.SetMetadata("format", "pt");
  writer.Write(file);

  // The data section starts 8-byte aligned, as the reference writer pads it.
  const std::vector<char> bytes = ReadBytes(file);
  ASSERT_GE(bytes.size(), 8u);
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ(header_bytes % 8, 0u);

  const SafetensorsFile st = SafetensorsFile::Open(file);
  EXPECT_EQ(st.path(), file);
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.Names(), (std::vector<std::string>{"brain", "converted", "empty", "half",
                                                  "model.layers.0.mlp.gate.weight", "scalar"}));
  EXPECT_TRUE(st.Has("half"));
  EXPECT_FALSE(st.Has("__metadata__"));
  EXPECT_FALSE(st.Has("absent"));

  const TensorInfo& gate = st.Info("model.layers.0.mlp.gate.weight");
  EXPECT_EQ(gate.name, "model.layers.0.mlp.gate.weight");
  EXPECT_EQ(gate.dtype, TensorDtype::kF32);
  EXPECT_EQ(gate.shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(gate.element_count(), 15);
  EXPECT_EQ(gate.data_end - gate.data_begin, 60u);
  EXPECT_EQ(st.Info("scalar").element_count(), 1);
  EXPECT_EQ(st.Info("empty").element_count(), 0);
  EXPECT_EQ(st.Info("empty").data_begin, st.Info("empty").data_end);

  // F32: exact as F32, round-to-nearest-even as bf16.
  std::vector<float> f32_back(15);
  st.ReadF32("model.layers.0.mlp.gate.weight", {3, 5}, f32_back.data());
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(f32_back[i]), std::bit_cast<uint32_t>(f32[i])) << i;
  }
  std::vector<uint16_t> f32_as_bf16(15);
  st.ReadBf16("model.layers.0.mlp.gate.weight", {3, 5}, f32_as_bf16.data());
  for (size_t i = 0; i < f32.size(); ++i)
    EXPECT_EQ(f32_as_bf16[i], kernels::FloatToBf16(f32[i])) << i;
  EXPECT_EQ(f32_as_bf16[1], 0x3f80);  // tie to even
  EXPECT_EQ(f32_as_bf16[2], 0x3f82);  // tie to even
  EXPECT_EQ(f32_as_bf16[8], 0x3f81);  // above the tie

  // F16: exact widening to F32; bf16 through the exact float.
  std::vector<float> f16_back(7);
  st.ReadF32("half", {7, 1}, f16_back.data());
  for (size_t i = 0; i < f16.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(f16_back[i]), std::bit_cast<uint32_t>(f16_values[i])) << i;
  }
  std::vector<uint16_t> f16_as_bf16(7);
  st.ReadBf16("half", {7, 1}, f16_as_bf16.data());
  for (size_t i = 0; i < f16.size(); ++i) {
    EXPECT_EQ(f16_as_bf16[i], kernels::FloatToBf16(f16_values[i])) << i;
  }
  EXPECT_EQ(f16_as_bf16[0], 0x3f80);
  EXPECT_EQ(f16_as_bf16[3], 0x4780);  // 65504 rounds up to 65536 in bf16

  // BF16: bits unchanged; exact widening to F32.
  std::vector<uint16_t> bf16_back(21);
  st.ReadBf16("brain", {3, 1, 7}, bf16_back.data());
  EXPECT_EQ(bf16_back, bf16);
  std::vector<float> bf16_as_f32(21);
  st.ReadF32("brain", {3, 1, 7}, bf16_as_f32.data());
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>(bf16_as_f32[i]), static_cast<uint32_t>(bf16[i]) << 16) << i;
  }

  std::vector<uint16_t> converted(5);
  st.ReadBf16("converted", {5}, converted.data());
  for (size_t i = 0; i < from_floats.size(); ++i) {
    EXPECT_EQ(converted[i], kernels::FloatToBf16(from_floats[i])) << i;
  }

  float scalar_back = 0;
  st.ReadF32("scalar", {}, &scalar_back);
  EXPECT_EQ(scalar_back, 42.5f);
  uint16_t scalar_bf16 = 0;
  st.ReadBf16("scalar", {}, &scalar_bf16);
  EXPECT_EQ(scalar_bf16, kernels::FloatToBf16(42.5f));
  st.ReadF32("empty", {0, 5}, nullptr);  // nothing to copy
}

TEST(Safetensors, FileIsMovable) {
  const fs::path dir = testing::MakeTempDir("safetensors-move");
  const std::vector<float> values = {1.5f, -2.5f};
  SafetensorsWriter writer;
  writer.Add("a", TensorDtype::kF32, {2}, values.data());
  writer.Write(dir / "a.safetensors");
  writer.Write(dir / "b.safetensors");

  SafetensorsFile first = SafetensorsFile::Open(dir / "a.safetensors");
  SafetensorsFile moved(std::move(first));
  std::vector<float> back(2);
  moved.ReadF32("a", {2}, back.data());
  EXPECT_EQ(back, values);
  SafetensorsFile other = SafetensorsFile::Open(dir / "b.safetensors");
  other = std::move(moved);  // unmaps b, takes over a
  EXPECT_EQ(other.path(), dir / "a.safetensors");
  other.ReadF32("a", {2}, back.data());
  EXPECT_EQ(back, values);
  std::vector<SafetensorsFile> files;
  files.push_back(std::move(other));
  files.push_back(SafetensorsFile::Open(dir / "b.safetensors"));
  files[0].ReadF32("a", {2}, back.data());
  EXPECT_EQ(back, values);
}

// ----- models: a file, a folder, a sharded folder -----

TEST(SafetensorsModel, OpensAFileOrAFolderWithModelSafetensors) {
  const fs::path dir = testing::MakeTempDir("safetensors-model");
  const std::vector<float> values = {1.0f, 2.0f, 3.0f};
  SafetensorsWriter writer;
  writer.Add("lm_head.weight", TensorDtype::kF32, {1, 3}, values.data());
  writer.Write(dir / "model.safetensors");

  for (const fs::path& path : {dir / "model.safetensors", dir}) {
    const SafetensorsModel model = SafetensorsModel::Open(path);
    EXPECT_EQ(model.path(), path);
    EXPECT_EQ(model.Names(), std::vector<std::string>{"lm_head.weight"});
    EXPECT_TRUE(model.Has("lm_head.weight"));
    EXPECT_FALSE(model.Has("model.embed_tokens.weight"));
    EXPECT_EQ(model.Info("lm_head.weight").shape, (std::vector<int64_t>{1, 3}));
    std::vector<float> back(3);
    model.ReadF32("lm_head.weight", {1, 3}, back.data());
    EXPECT_EQ(back, values);
    const std::string error = ErrorOf([&] { model.Info("model.embed_tokens.weight"); });
    EXPECT_EQ(error, (dir / "model.safetensors").string() +
                         ": tensor 'model.embed_tokens.weight' not found");
  }
}

// Two shards and an index mapping four tensors.
fs::path MakeShardedFolder(const std::string& prefix) {
  const fs::path dir = testing::MakeTempDir(prefix);
  const std::vector<float> a = {1, 2, 3, 4};
  const std::vector<float> b = {5, 6};
  SafetensorsWriter first;
  first.Add("model.embed_tokens.weight", TensorDtype::kF32, {2, 2}, a.data());
  first.AddBf16FromFloat("model.layers.0.mlp.gate.weight", {2}, b.data());
  first.Write(dir / "model-00001-of-00002.safetensors");
  SafetensorsWriter second;
  second.Add("model.layers.1.mlp.gate.weight", TensorDtype::kF32, {1, 2}, b.data());
  second.Add("lm_head.weight", TensorDtype::kF32, {4}, a.data());
  second.Write(dir / "model-00002-of-00002.safetensors");
  WriteText(dir / "model.safetensors.index.json", R"({
    "metadata": {"total_size": 40},
    "weight_map": {
      "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
      "model.layers.0.mlp.gate.weight": "model-00001-of-00002.safetensors",
      "model.layers.1.mlp.gate.weight": "model-00002-of-00002.safetensors",
      "lm_head.weight": "model-00002-of-00002.safetensors"
    }
  })");
  return dir;
}

TEST(SafetensorsModel, ReadsAShardedFolderThroughItsIndex) {
  const fs::path dir = MakeShardedFolder("safetensors-sharded");
  // Even with a model.safetensors present, the index wins.
  SafetensorsWriter decoy;
  decoy.Add("decoy", TensorDtype::kF32, {0}, nullptr);
  decoy.Write(dir / "model.safetensors");

  const SafetensorsModel model = SafetensorsModel::Open(dir);
  EXPECT_EQ(model.files().size(), 2u);
  EXPECT_EQ(model.Names(), (std::vector<std::string>{"lm_head.weight", "model.embed_tokens.weight",
                                                     "model.layers.0.mlp.gate.weight",
                                                     "model.layers.1.mlp.gate.weight"}));
  EXPECT_FALSE(model.Has("decoy"));
  std::vector<float> back(4);
  model.ReadF32("model.embed_tokens.weight", {2, 2}, back.data());
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 4}));
  model.ReadF32("lm_head.weight", {4}, back.data());
  EXPECT_EQ(back, (std::vector<float>{1, 2, 3, 4}));
  std::vector<uint16_t> gate(2);
  model.ReadBf16("model.layers.1.mlp.gate.weight", {1, 2}, gate.data());
  EXPECT_EQ(gate, (std::vector<uint16_t>{kernels::FloatToBf16(5), kernels::FloatToBf16(6)}));
  EXPECT_EQ(model.Info("model.layers.0.mlp.gate.weight").dtype, TensorDtype::kBf16);

  const std::string index = (dir / "model.safetensors.index.json").string();
  EXPECT_EQ(ErrorOf([&] { model.Info("model.norm.weight"); }),
            index + ": tensor 'model.norm.weight' not found");
  // A shape mismatch names the shard that holds the tensor.
  EXPECT_EQ(ErrorOf([&] {
              model.ReadF32("lm_head.weight", {2, 2}, back.data());
            }),
            (dir / "model-00002-of-00002.safetensors").string() +
                ": tensor 'lm_head.weight': expected shape [2, 2], file has [4]");
}

TEST(SafetensorsModel, RefusesBrokenIndexesAndFolders) {
  const fs::path dir = MakeShardedFolder("safetensors-bad-index");
  const fs::path index = dir / "model.safetensors.index.json";

  WriteText(index, R"({"weight_map": {"lm_head.weight": "model-00003-of-00003.safetensors"}})");
  std::string error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, index.string() + ": weight_map maps tensor 'lm_head.weight' to shard "
                                               "'model-00003-of-00003.safetensors', which does "
                                               "not exist"))
      << error;

  WriteText(index, R"({"weight_map": {"model.norm.weight": "model-00001-of-00002.safetensors"}})");
  error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, index.string() + ": weight_map maps tensor 'model.norm.weight' to "
                                               "shard 'model-00001-of-00002.safetensors', which "
                                               "does not contain it"))
      << error;

  WriteText(index, R"({"metadata": {}})");
  error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, index.string() + ": missing required field 'weight_map'")) << error;

  WriteText(index, R"({"weight_map": {"lm_head.weight": 3}})");
  error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, "field 'weight_map.lm_head.weight': expected a shard file name"))
      << error;

  WriteText(index, R"({"weight_map": {"lm_head.weight": )");
  error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, index.string() + ": malformed JSON")) << error;

  // A broken shard is reported with the shard's name.
  WriteText(index, R"({"weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors"}})");
  WriteRaw(dir / "model-00002-of-00002.safetensors", "{", 0);
  error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, (dir / "model-00002-of-00002.safetensors").string() +
                                  ": malformed safetensors header JSON"))
      << error;

  const fs::path empty = testing::MakeTempDir("safetensors-empty-folder");
  error = ErrorOf([&] { SafetensorsModel::Open(empty); });
  EXPECT_EQ(error, empty.string() +
                       ": no model.safetensors or model.safetensors.index.json in this folder");
  error = ErrorOf([&] { SafetensorsModel::Open(empty / "absent.safetensors"); });
  EXPECT_TRUE(Contains(error, (empty / "absent.safetensors").string())) << error;
}

// Issue 13: shards named by the index stay in its folder (an absolute path or ".." would read any
// file on the machine), and bytes of the index are escaped in messages.
TEST(SafetensorsModel, RefusesShardsOutsideTheFolder) {
  const fs::path dir = MakeShardedFolder("safetensors-outside");
  const fs::path index = dir / "model.safetensors.index.json";
  const fs::path outside = testing::MakeTempDir("safetensors-outside-shard");
  fs::copy_file(dir / "model-00002-of-00002.safetensors", outside / "shard.safetensors");
  for (const std::string& shard : {(outside / "shard.safetensors").string(),
                                   "../" + outside.filename().string() + "/shard.safetensors",
                                   std::string("sub/../../x.safetensors")}) {
    WriteText(index, R"({"weight_map": {"lm_head.weight": ")" + shard + R"("}})");
    const std::string error = ErrorOf([&] { SafetensorsModel::Open(dir); });
    EXPECT_TRUE(Contains(error, "to shard '" + shard + "', which is outside the index's folder"))
        << error;
  }
  WriteText(index, R"({"weight_map": {"lm\u001b[2J": "model-00002-of-00002.safetensors"}})");
  const std::string error = ErrorOf([&] { SafetensorsModel::Open(dir); });
  EXPECT_TRUE(Contains(error, "tensor 'lm\\x1b[2J'")) << error;
  EXPECT_FALSE(Contains(error, "\x1b")) << error;
}

// ----- corrupt files -----

// A valid file with one F32 tensor "model.layers.0.mlp.gate.weight" of shape [8, 32].
fs::path MakeValidFile(const fs::path& dir) {
  const fs::path file = dir / "valid.safetensors";
  std::vector<float> values(8 * 32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  SafetensorsWriter writer;
  writer.Add("model.layers.0.mlp.gate.weight", TensorDtype::kF32, {8, 32}, values.data());
  writer.Write(file);
  return file;
}

TEST(SafetensorsErrors, TruncatedFiles) {
  const fs::path dir = testing::MakeTempDir("safetensors-truncated");
  const std::vector<char> valid = ReadBytes(MakeValidFile(dir));
  const fs::path file = dir / "cut.safetensors";

  WriteBytes(file, std::vector<char>(valid.begin(), valid.begin() + 5));
  EXPECT_EQ(OpenError(file),
            file.string() +
                ": not a safetensors file: 5 bytes, shorter than the 8-byte header "
                "length");
  WriteBytes(file, {});
  EXPECT_TRUE(Contains(OpenError(file), file.string() + ": not a safetensors file: 0 bytes"));

  // Cut inside the header: the stated header length no longer fits.
  WriteBytes(file, std::vector<char>(valid.begin(), valid.begin() + 20));
  std::string error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": header length ")) << error;
  EXPECT_TRUE(Contains(error, "exceeds the rest of the file (12 bytes)")) << error;

  // Cut inside the data: the tensor's offsets run past the end.
  WriteBytes(file, std::vector<char>(valid.begin(), valid.end() - 4));
  error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": tensor 'model.layers.0.mlp.gate.weight': "
                                              "data_offsets [0,1024] extend past the end of the "
                                              "file (data section is 1020 bytes)"))
      << error;
}

TEST(SafetensorsErrors, CorruptHeaderLength) {
  const fs::path dir = testing::MakeTempDir("safetensors-length");
  const std::vector<char> valid = ReadBytes(MakeValidFile(dir));
  const fs::path file = dir / "flipped.safetensors";

  // The high byte flipped: a length of ~2^63.
  std::vector<char> bytes = valid;
  bytes[7] = static_cast<char>(0x80);
  WriteBytes(file, bytes);
  std::string error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": header length 9223372036854775")) << error;
  EXPECT_TRUE(Contains(error, "truncated or not a safetensors file")) << error;

  // All ones.
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(0xff);
  WriteBytes(file, bytes);
  EXPECT_TRUE(Contains(OpenError(file), file.string() + ": header length 18446744073709551615"));

  // 8 bytes too short (more than the padding): the JSON loses its closing brace.
  bytes = valid;
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  length -= 8;
  std::memcpy(bytes.data(), &length, 8);
  WriteBytes(file, bytes);
  error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": malformed safetensors header JSON")) << error;
}

TEST(SafetensorsErrors, MalformedHeaderJson) {
  const fs::path dir = testing::MakeTempDir("safetensors-json");
  const fs::path file = dir / "bad.safetensors";
  WriteRaw(file, R"({"w": {"dtype": "F32", "shape": [1], )", 4);
  std::string error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": malformed safetensors header JSON: ")) << error;

  WriteRaw(file, "", 0);
  EXPECT_TRUE(Contains(OpenError(file), file.string() + ": malformed safetensors header JSON"));

  WriteRaw(file, "[1, 2]", 0);
  EXPECT_EQ(OpenError(file),
            file.string() + ": safetensors header must be a JSON object, got [1,2]");

  WriteRaw(file, R"({"__metadata__": {"format": 1}})", 0);
  EXPECT_EQ(OpenError(file),
            file.string() + ": '__metadata__' entry 'format' must be a string, got 1");

  WriteRaw(file, R"({"w": [1, 2]})", 0);
  EXPECT_TRUE(Contains(OpenError(file), file.string() + ": tensor 'w': expected an object"));
}

// Issue 13: two tensors sharing bytes would alias each other's weights; the format forbids it.
TEST(SafetensorsErrors, OverlappingOffsetsAreRefused) {
  const fs::path dir = testing::MakeTempDir("safetensors-overlap");
  const fs::path file = dir / "overlap.safetensors";
  WriteRaw(file,
           R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
           R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
           12);
  EXPECT_EQ(OpenError(file),
            file.string() + ": tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
  // Adjacent tensors and empty tensors are fine.
  WriteRaw(file,
           R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
           R"( "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]},)"
           R"( "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
           12);
  EXPECT_NO_THROW(SafetensorsFile::Open(file));
}

// Issue 13: a header nested 100,000 levels deep is refused (it used to crash in a recursive dump).
TEST(SafetensorsErrors, DeeplyNestedHeaderIsRefused) {
  const fs::path dir = testing::MakeTempDir("safetensors-deep");
  const fs::path file = dir / "deep.safetensors";
  WriteRaw(file, std::string(100000, '['), 0);
  const std::string error = OpenError(file);
  EXPECT_TRUE(Contains(error, file.string() + ": ")) << error;
  EXPECT_TRUE(Contains(error, "nested deeper than 256 levels")) << error;
}

TEST(SafetensorsErrors, MissingFieldsNameTheTensor) {
  const fs::path dir = testing::MakeTempDir("safetensors-missing");
  const fs::path file = dir / "missing.safetensors";
  WriteRaw(file, R"({"model.norm.weight": {"shape": [2], "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(OpenError(file), file.string() + ": tensor 'model.norm.weight': missing 'dtype'");
  WriteRaw(file, R"({"model.norm.weight": {"dtype": "F32", "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(OpenError(file), file.string() + ": tensor 'model.norm.weight': missing 'shape'");
  WriteRaw(file, R"({"model.norm.weight": {"dtype": "F32", "shape": [2]}})", 8);
  EXPECT_EQ(OpenError(file),
            file.string() + ": tensor 'model.norm.weight': missing 'data_offsets'");
}

TEST(SafetensorsErrors, UnsupportedDtypeAndBadShapes) {
  const fs::path dir = testing::MakeTempDir("safetensors-dtype");
  const fs::path file = dir / "odd.safetensors";
  WriteRaw(file, R"({"q.weight": {"dtype": "I8", "shape": [4], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(OpenError(file), file.string() +
                                 ": tensor 'q.weight': unsupported dtype 'I8' (supported: BF16, "
                                 "F16, F32)");
  WriteRaw(file, R"({"q.weight": {"dtype": 16, "shape": [4], "data_offsets": [0, 4]}})", 4);
  EXPECT_EQ(OpenError(file),
            file.string() + ": tensor 'q.weight': 'dtype' must be a string, got 16");

  WriteRaw(file, R"({"q.weight": {"dtype": "F32", "shape": [4, -2], "data_offsets": [0, 0]}})", 0);
  EXPECT_EQ(OpenError(file),
            file.string() + ": tensor 'q.weight': negative dimension -2 in shape [4, -2]");
  WriteRaw(file, R"({"q.weight": {"dtype": "F32", "shape": [4.5], "data_offsets": [0, 18]}})", 18);
  EXPECT_EQ(OpenError(file),
            file.string() + ": tensor 'q.weight': 'shape' must be an array of integers, got [4.5]");
  WriteRaw(file, R"({"q.weight": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", 16);
  EXPECT_TRUE(Contains(OpenError(file), "tensor 'q.weight': 'shape' must be an array of integers"));
  WriteRaw(file,
           R"({"q.weight": {"dtype": "F32", "shape": [4294967296, 4294967296, 4294967296],)"
           R"( "data_offsets": [0, 0]}})",
           0);
  EXPECT_TRUE(Contains(OpenError(file),
                       "tensor 'q.weight': shape [4294967296, 4294967296, "
                       "4294967296] has too many elements"));
}

TEST(SafetensorsErrors, BadDataOffsets) {
  const fs::path dir = testing::MakeTempDir("safetensors-offsets");
  const fs::path file = dir / "offsets.safetensors";
  const std::string where = file.string() + ": tensor 'model.layers.0.mlp.gate.weight': ";

  WriteRaw(file,
           R"({"model.layers.0.mlp.gate.weight": {"dtype": "F32", "shape": [2], )"
           R"("data_offsets": [8, 0]}})",
           16);
  EXPECT_EQ(OpenError(file),
            where + "'data_offsets' must be [begin, end] with 0 <= begin <= end, got [8,0]");
  WriteRaw(file,
           R"({"model.layers.0.mlp.gate.weight": {"dtype": "F32", "shape": [2], )"
           R"("data_offsets": [-8, 0]}})",
           16);
  EXPECT_TRUE(Contains(OpenError(file), where + "'data_offsets' must be [begin, end]"));
  WriteRaw(file,
           R"({"model.layers.0.mlp.gate.weight": {"dtype": "F32", "shape": [2], )"
           R"("data_offsets": [0]}})",
           16);
  EXPECT_TRUE(Contains(OpenError(file), where + "'data_offsets' must be [begin, end]"));
  WriteRaw(file,
           R"({"model.layers.0.mlp.gate.weight": {"dtype": "F32", "shape": [2], )"
           R"("data_offsets": [8, 16]}})",
           12);
  EXPECT_EQ(OpenError(file), where +
                                 "data_offsets [8,16] extend past the end of the file (data "
                                 "section is 12 bytes)");
  // Bytes spanned != elements * dtype size.
  WriteRaw(file,
           R"({"model.layers.0.mlp.gate.weight": {"dtype": "BF16", "shape": [2, 3], )"
           R"("data_offsets": [0, 24]}})",
           24);
  EXPECT_EQ(OpenError(file), where +
                                 "data_offsets [0,24] span 24 bytes, but shape [2, 3] of BF16 "
                                 "needs 12 bytes");
}

TEST(SafetensorsErrors, ShapeMismatchAndMissingTensorOnRead) {
  const fs::path dir = testing::MakeTempDir("safetensors-shape");
  const fs::path file = MakeValidFile(dir);
  const SafetensorsFile st = SafetensorsFile::Open(file);
  std::vector<float> f32(8 * 64);
  std::vector<uint16_t> bf16(8 * 64);
  const std::string expected = file.string() +
                               ": tensor 'model.layers.0.mlp.gate.weight': expected shape [8, "
                               "64], file has [8, 32]";
  EXPECT_EQ(ErrorOf([&] {
              st.ReadF32("model.layers.0.mlp.gate.weight", {8, 64}, f32.data());
            }),
            expected);
  EXPECT_EQ(ErrorOf([&] {
              st.ReadBf16("model.layers.0.mlp.gate.weight", {8, 64}, bf16.data());
            }),
            expected);
  EXPECT_EQ(ErrorOf([&] { st.ReadF32("model.layers.0.mlp.gate.weight", {256}, f32.data()); }),
            file.string() +
                ": tensor 'model.layers.0.mlp.gate.weight': expected shape [256], "
                "file has [8, 32]");
  EXPECT_EQ(
      ErrorOf([&] {
        SafetensorsModel::Open(file).ReadF32("model.layers.0.mlp.gate.weight", {8, 64}, f32.data());
      }),
      expected);
  EXPECT_EQ(ErrorOf([&] { st.Info("model.layers.0.mlp.up.weight"); }),
            file.string() + ": tensor 'model.layers.0.mlp.up.weight' not found");
  EXPECT_EQ(ErrorOf([&] {
              st.ReadF32("model.layers.0.mlp.up.weight", {8, 32}, f32.data());
            }),
            file.string() + ": tensor 'model.layers.0.mlp.up.weight' not found");
  // The right shape still reads.
  st.ReadF32("model.layers.0.mlp.gate.weight", {8, 32}, f32.data());
  EXPECT_EQ(f32[255], 127.5f);
}

TEST(SafetensorsErrors, NotAFile) {
  const fs::path dir = testing::MakeTempDir("safetensors-notafile");
  EXPECT_TRUE(Contains(OpenError(dir / "absent.safetensors"),
                       (dir / "absent.safetensors").string() + ": cannot open safetensors file"));
  EXPECT_EQ(OpenError(dir), dir.string() + ": not a regular file");
}

// ----- writer -----

TEST(SafetensorsWriter, RefusesDuplicatesReservedNamesAndNegativeDims) {
  const float value = 1.0f;
  SafetensorsWriter writer;
  writer.Add("a", TensorDtype::kF32, {1}, &value);
  EXPECT_EQ(ErrorOf([&] { writer.Add("a", TensorDtype::kF32, {1}, &value); }),
            "SafetensorsWriter: tensor 'a': added twice");
  EXPECT_EQ(ErrorOf([&] { writer.AddBf16FromFloat("a", {1}, &value); }),
            "SafetensorsWriter: tensor 'a': added twice");
  EXPECT_TRUE(Contains(ErrorOf([&] { writer.Add("__metadata__", TensorDtype::kF32, {1}, &value); }),
                       "reserved"));
  EXPECT_EQ(ErrorOf([&] { writer.Add("b", TensorDtype::kF32, {-1}, &value); }),
            "SafetensorsWriter: tensor 'b': negative dimension -1 in shape [-1]");
  EXPECT_EQ(ErrorOf([&] { writer.Add("c", TensorDtype::kF32, {2}, nullptr); }),
            "SafetensorsWriter: tensor 'c': no data");
  EXPECT_TRUE(Contains(ErrorOf([&] { writer.Add("", TensorDtype::kF32, {1}, &value); }),
                       "empty tensor name"));
}

TEST(SafetensorsWriter, WritesAtomicallyAndReplacesAnExistingFile) {
  const fs::path dir = testing::MakeTempDir("safetensors-atomic");
  const fs::path file = dir / "w.safetensors";
  const std::vector<float> one = {1.0f};
  const std::vector<float> two = {2.0f, 3.0f};
  SafetensorsWriter first;
  first.Add("x", TensorDtype::kF32, {1}, one.data());
  first.Write(file);
  SafetensorsWriter second;
  second.Add("x", TensorDtype::kF32, {2}, two.data());
  second.Write(file);

  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    ++entries;
    EXPECT_EQ(entry.path().filename(), "w.safetensors");  // no temporary left behind
  }
  EXPECT_EQ(entries, 1u);
  std::vector<float> back(2);
  SafetensorsFile::Open(file).ReadF32("x", {2}, back.data());
  EXPECT_EQ(back, two);

  const fs::path nowhere = dir / "absent" / "w.safetensors";
  EXPECT_TRUE(Contains(ErrorOf([&] { second.Write(nowhere); }),
                       nowhere.string() + ": cannot write: folder"));
  EXPECT_FALSE(fs::exists(nowhere));
}

TEST(SafetensorsWriter, DtypeNamesAndSizes) {
  EXPECT_EQ(ToString(TensorDtype::kBf16), "BF16");
  EXPECT_EQ(ToString(TensorDtype::kF16), "F16");
  EXPECT_EQ(ToString(TensorDtype::kF32), "F32");
  EXPECT_EQ(DtypeSizeBytes(TensorDtype::kBf16), 2);
  EXPECT_EQ(DtypeSizeBytes(TensorDtype::kF16), 2);
  EXPECT_EQ(DtypeSizeBytes(TensorDtype::kF32), 4);
  EXPECT_EQ(FormatShape({}), "[]");
  EXPECT_EQ(FormatShape({8, 64}), "[8, 64]");
}

}  // namespace
}  // namespace moelab::weights
