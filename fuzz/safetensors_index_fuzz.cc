// Sharded safetensors folders (weights/safetensors SafetensorsModel): the index's weight_map, shard
// names (never outside the folder), tensors a shard must hold. One real shard sits in the folder.
#include <vector>

#include "fuzz/fuzz_support.h"
#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path folder = [] {
    const auto path = moelab::fuzz::WorkDir() / "sharded";
    std::filesystem::create_directories(path);
    moelab::weights::SafetensorsWriter writer;
    const std::vector<float> values = {1, 2, 3, 4};
    writer.AddBf16FromFloat("a", {2, 2}, values.data());
    writer.AddBf16FromFloat("b", {4}, values.data());
    writer.Write(path / "model-00001-of-00001.safetensors");
    return path;
  }();
  std::ofstream(folder / "model.safetensors.index.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  moelab::fuzz::Refuses([&] {
    const moelab::weights::SafetensorsModel model = moelab::weights::SafetensorsModel::Open(folder);
    for (const std::string& name : model.Names()) model.Info(name);
  });
  return 0;
}
