// Single safetensors files (weights/safetensors): the 8-byte length, the JSON header, offsets, and
// reading every tensor it declares.
#include <vector>

#include "fuzz/fuzz_support.h"
#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = moelab::fuzz::WriteInput(data, size, "model.safetensors");
  moelab::fuzz::Refuses([&] {
    const moelab::weights::SafetensorsFile opened = moelab::weights::SafetensorsFile::Open(file);
    for (const std::string& name : opened.Names()) {
      const moelab::weights::TensorInfo& info = opened.Info(name);
      if (info.element_count() > (1 << 20)) continue;
      std::vector<float> values(static_cast<size_t>(info.element_count()));
      opened.ReadF32(name, info.shape, values.data());
    }
  });
  return 0;
}
