// model/preset_cache.h: while a ScopedPresetCache lives, PresetStore loads come from memory (a
// changed file is not seen), failed loads are not kept, and without one every load reads the file.
#include "model/preset_cache.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

PresetStore Store() { return PresetStore(testing::PresetDir()); }

// A copy of a preset model at `path` with its name changed to `name`.
void WriteModel(const std::filesystem::path& path, const std::string& name) {
  nlohmann::json json = ModelSpecToJson(Store().LoadModel("mixtral-8x7b"));
  json["name"] = name;
  std::ofstream(path) << json.dump();
}

TEST(PresetCache, LoadsComeFromMemoryWhileItLives) {
  const std::filesystem::path dir = testing::MakeTempDir("moelab-preset-cache");
  const std::string path = (dir / "m.json").string();
  WriteModel(path, "first");
  {
    const ScopedPresetCache cache;
    EXPECT_EQ(Store().LoadModel(path).name, "first");
    WriteModel(path, "second");
    EXPECT_EQ(Store().LoadModel(path).name, "first");  // the file is not read again
    // Hardware too, and composed nodes through their accelerator.
    EXPECT_EQ(Store().LoadHardware("2xh100-sxm").name, Store().LoadHardware("2xh100-sxm").name);
  }
  EXPECT_EQ(Store().LoadModel(path).name, "second");  // without a cache: the file as it is now
  WriteModel(path, "third");
  EXPECT_EQ(Store().LoadModel(path).name, "third");
  std::filesystem::remove_all(dir);
}

TEST(PresetCache, AFailedLoadIsNotKept) {
  const std::filesystem::path dir = testing::MakeTempDir("moelab-preset-cache");
  const std::string path = (dir / "later.json").string();
  const ScopedPresetCache cache;
  EXPECT_THROW(Store().LoadModel(path), base::Error);
  WriteModel(path, "later");
  EXPECT_EQ(Store().LoadModel(path).name, "later");
  std::filesystem::remove_all(dir);
}

TEST(PresetCache, OneAtATime) {
  const ScopedPresetCache cache;
  EXPECT_THROW(ScopedPresetCache(), base::Error);
}

}  // namespace
}  // namespace moelab::model
