#include "model/preset_cache.h"

#include <map>
#include <mutex>

#include "base/error.h"

namespace moelab::model {
namespace {

struct Cache {
  std::mutex mutex;
  bool alive = false;
  std::map<std::string, MoeModelSpec> models;
  std::map<std::string, HardwareSpec> hardware;
};

Cache& TheCache() {
  static Cache cache;
  return cache;
}

template <typename Spec>
Spec Lookup(std::map<std::string, Spec> Cache::*table, const std::string& key,
            const std::function<Spec()>& load) {
  Cache& cache = TheCache();
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!cache.alive) return load();
    const auto found = (cache.*table).find(key);
    if (found != (cache.*table).end()) return found->second;
  }
  Spec spec = load();  // outside the lock: loading may load other presets
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.alive) (cache.*table).emplace(key, spec);
  return spec;
}

}  // namespace

ScopedPresetCache::ScopedPresetCache() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  if (cache.alive) throw base::Error("a preset cache is already in use");
  cache.alive = true;
}

ScopedPresetCache::~ScopedPresetCache() {
  Cache& cache = TheCache();
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.alive = false;
  cache.models.clear();
  cache.hardware.clear();
}

namespace preset_cache {

MoeModelSpec Model(const std::string& key, const std::function<MoeModelSpec()>& load) {
  return Lookup(&Cache::models, key, load);
}

HardwareSpec Hardware(const std::string& key, const std::function<HardwareSpec()>& load) {
  return Lookup(&Cache::hardware, key, load);
}

}  // namespace preset_cache
}  // namespace moelab::model
