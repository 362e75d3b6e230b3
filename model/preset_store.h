#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace moelab::model {

struct PresetEntry {
  std::string name;
  std::string kind;  // "model", or a HardwareKind name
  std::string display_name;
  std::filesystem::path file;
};

// Finds presets by name in a folder tree (root/models/*.json, root/hardware/{accelerators,hosts,
// links,nodes}/*.json) or loads a file given by path. A value is a path when it names an existing
// file or contains '/' or ends in ".json"; otherwise a preset name. Unknown names are an error
// that suggests the nearest names.
class PresetStore {
 public:
  explicit PresetStore(std::filesystem::path root);

  // MOELAB_PRESETS when set, else the presets/ folder of the source tree the binary was built from.
  static PresetStore Default();

  const std::filesystem::path& root() const { return root_; }

  std::vector<PresetEntry> ListModels() const;
  std::vector<PresetEntry> ListHardware() const;

  // A moelab.model/1 file or preset, or a Hugging Face config.json (told apart by its fields).
  MoeModelSpec LoadModel(const std::string& name_or_path) const;

  // Accelerator, host, link or node; "<N>x<accelerator>" composes a node of N accelerators on
  // NVLink when the accelerator has it, else on its host link (PCIe).
  HardwareSpec LoadHardware(const std::string& name_or_path) const;

 private:
  // What LoadModel and LoadHardware read when no ScopedPresetCache has them (model/preset_cache.h).
  MoeModelSpec LoadModelFromDisk(const std::string& name_or_path) const;
  HardwareSpec LoadHardwareFromDisk(const std::string& name_or_path) const;
  std::filesystem::path FindHardwareFile(const std::string& name, const std::string& folder,
                                         const std::string& kind_label) const;
  HardwareSpec HardwareFromFile(const std::filesystem::path& file) const;
  HardwareSpec HardwareFromJson(const nlohmann::json& json, const std::string& origin) const;
  HardwareSpec ComposeNode(const std::string& name, const std::string& display_name,
                           const std::string& accelerator, int64_t count,
                           const std::string& interconnect, const std::string& origin) const;

  std::filesystem::path root_;
};

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(const std::string& a, const std::string& b);

// "unknown <what> 'x'; did you mean 'y' or 'z'? (<how to list>)".
std::string UnknownNameMessage(const std::string& what, const std::string& name,
                               const std::vector<std::string>& known,
                               const std::string& how_to_list);

}  // namespace moelab::model
