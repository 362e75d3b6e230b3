// Hardware files and presets (model/preset_store LoadHardware of a file path), references to other
// hardware resolved against the real presets folder.
#include "fuzz/fuzz_support.h"
#include "model/preset_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const moelab::model::PresetStore store(MOELAB_PRESET_DIR);
  const auto file = moelab::fuzz::WriteInput(data, size, "hw.json");
  moelab::fuzz::Refuses([&] { store.LoadHardware(file.string()); });
  return 0;
}
