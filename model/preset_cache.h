#pragma once

#include <functional>
#include <string>

#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace moelab::model {

// While a ScopedPresetCache is alive, PresetStore::LoadModel and LoadHardware give back what they
// gave before for the same store root and name (or path) instead of reading and parsing the files
// again. For batch jobs over fixed presets: a `moelab sweep` point re-ran its command's loading, 8
// file opens and ~30 stats a point, half of a `plan sd` point's time. Files changed while the
// cache lives are not seen; a load that throws is not cached (the next one throws again).
// One at a time (a second while one lives is an error); thread-safe.
class ScopedPresetCache {
 public:
  ScopedPresetCache();
  ~ScopedPresetCache();
  ScopedPresetCache(const ScopedPresetCache&) = delete;
  ScopedPresetCache& operator=(const ScopedPresetCache&) = delete;
};

namespace preset_cache {

// The cached spec for `key`, or load() stored under it; load() runs without the cache when none
// is alive.
MoeModelSpec Model(const std::string& key, const std::function<MoeModelSpec()>& load);
HardwareSpec Hardware(const std::string& key, const std::function<HardwareSpec()>& load);

}  // namespace preset_cache
}  // namespace moelab::model
