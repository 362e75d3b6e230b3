#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/preset_store.h"

namespace moelab::model {

// What `moelab model show|list` and `moelab hw show|list` report: each as JSON (the CSV rows are
// that JSON's, report/json_rows.h) and as text.

// A model's derived quantities (parameter counts and their breakdown, bytes, T_thres at `tau`,
// KV bytes per token, published counts and deviations) and its spec: moelab.model_show/1 without
// schema and provenance.
nlohmann::json DescribeModel(const MoeModelSpec& spec, double tau);
std::string ModelText(const MoeModelSpec& spec, const nlohmann::json& description);
std::string HardwareText(const HardwareSpec& spec);

// The presets a store lists, one JSON object per preset and a text table.
struct PresetListing {
  nlohmann::json presets = nlohmann::json::array();
  std::string text;
};
PresetListing ListModelPresets(
    const PresetStore& store);  // name, display_name, total/active params, file
PresetListing ListHardwarePresets(const PresetStore& store);  // name, kind, display_name, file

}  // namespace moelab::model
