#include "sweep/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <cstdio>

#include "base/error.h"
#include "base/hash.h"
#include "base/input_file.h"
#include "base/json_reader.h"
#include "base/message_text.h"

namespace moelab::sweep {
namespace {

using nlohmann::ordered_json;

constexpr const char* kSpecSchema = "moelab.sweep_spec/1";

std::string Join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

void CheckScalar(const ordered_json& value, const std::string& origin, const std::string& field) {
  if (!value.is_string() && !value.is_number() && !value.is_boolean()) {
    throw base::Error(origin + ": " + field + ": expected a string, number or boolean, got " +
                      std::string(value.type_name()));
  }
}

void CheckOptionName(const std::string& name, const std::string& origin, const std::string& field,
                     const std::vector<std::string>& reserved) {
  if (name.empty() || name.front() == '-') {
    throw base::Error(origin + ": " + field + ": an option name without its dashes (\"batch\")");
  }
  if (std::find(reserved.begin(), reserved.end(), name) != reserved.end()) {
    throw base::Error(origin + ": " + field + ": --" + name +
                      " picks the output or writes a file per point; the sweep writes one output "
                      "(moelab sweep --out/--json/--csv)");
  }
}

// FNV-1a over the text, finished by SplitMix64's mixer: a stable 64-bit name for a spec.
std::string HashText(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ULL;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(base::Mix64(hash)));
  return hex;
}

// What makes two grid values one point: a number however written (1, "01", 1.0; 0 and -0.0), else
// the text the command line gets.
std::string SameValueKey(const std::string& text) {
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  if (!text.empty() && end == text.c_str() + text.size() && std::isfinite(number)) {
    char key[40];
    std::snprintf(key, sizeof(key), "number %.17g", number == 0 ? 0.0 : number);
    return key;
  }
  return "text " + text;
}

void ReadGrid(const ordered_json& grid, SweepSpec& spec, const std::vector<std::string>& reserved) {
  if (!grid.is_object() || grid.empty()) {
    throw base::Error(spec.origin +
                      ": grid: expected a non-empty object of option -> list of values");
  }
  int64_t points = 1;
  for (const auto& [name, values] : grid.items()) {
    const std::string field = "grid." + name;
    CheckOptionName(name, spec.origin, field, reserved);
    if (!values.is_array()) {
      throw base::Error(spec.origin + ": " + field + ": expected a list of values, got " +
                        std::string(values.type_name()) + " (a fixed value goes in options)");
    }
    if (values.empty()) throw base::Error(spec.origin + ": " + field + ": empty list");
    // A value twice ran its point twice: two rows a reader takes for two settings (4 and "4",
    // 0.5 and "0.50" are one value).
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < values.size(); ++i) {
      CheckScalar(values[i], spec.origin, field + "[" + std::to_string(i) + "]");
      const auto [at, fresh] = seen.emplace(SameValueKey(OptionText(values[i])), i);
      if (!fresh) {
        throw base::Error(spec.origin + ": " + field + "[" + std::to_string(i) +
                          "]: " + base::EscapeForMessage(OptionText(values[i])) +
                          " is listed twice (also " + field + "[" + std::to_string(at->second) +
                          "])");
      }
    }
    for (const auto& [fixed, value] : spec.options) {
      if (fixed == name) {
        throw base::Error(spec.origin + ": " + field + ": also in options." + name +
                          " (give an option fixed or swept, not both)");
      }
    }
    if (points > kMaxSweepPoints / static_cast<int64_t>(values.size())) {
      throw base::Error(spec.origin + ": grid: more than " + std::to_string(kMaxSweepPoints) +
                        " points (docs/limits.md); split the grid into several specs");
    }
    points *= static_cast<int64_t>(values.size());
    spec.grid.emplace_back(name, std::vector<ordered_json>(values.begin(), values.end()));
  }
}

}  // namespace

std::string OptionText(const nlohmann::ordered_json& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump();  // shortest text that reads back
}

int64_t SweepSpec::PointCount() const {
  int64_t count = 1;
  for (const auto& entry : grid) count *= static_cast<int64_t>(entry.second.size());
  return count;
}

std::vector<size_t> SweepSpec::ValueIndices(int64_t point) const {
  std::vector<size_t> indices(grid.size());
  for (size_t i = grid.size(); i-- > 0;) {
    const auto size = static_cast<int64_t>(grid[i].second.size());
    indices[i] = static_cast<size_t>(point % size);
    point /= size;
  }
  return indices;
}

std::vector<std::string> SweepSpec::PointArguments(int64_t point) const {
  std::vector<std::string> args;
  const auto add = [&args](const std::string& name, const ordered_json& value) {
    if (value.is_boolean()) {
      if (value.get<bool>()) args.push_back("--" + name);
      return;
    }
    args.push_back("--" + name);
    args.push_back(OptionText(value));
  };
  for (const auto& [name, value] : options) add(name, value);
  const std::vector<size_t> indices = ValueIndices(point);
  for (size_t i = 0; i < grid.size(); ++i) add(grid[i].first, grid[i].second[indices[i]]);
  return args;
}

std::string SweepSpec::PointLabel(int64_t point) const {
  std::string label = "point " + std::to_string(point) + " (";
  const std::vector<size_t> indices = ValueIndices(point);
  for (size_t i = 0; i < grid.size(); ++i) {
    label += (i ? ", " : "") + grid[i].first + "=" + OptionText(grid[i].second[indices[i]]);
  }
  return label + ")";
}

nlohmann::ordered_json SweepSpec::PointValues(int64_t point) const {
  ordered_json values = ordered_json::object();
  const std::vector<size_t> indices = ValueIndices(point);
  for (size_t i = 0; i < grid.size(); ++i) values[grid[i].first] = grid[i].second[indices[i]];
  return values;
}

SweepSpec ParseSweepSpec(const std::string& text, const std::string& origin,
                         const std::vector<std::string>& commands,
                         const std::vector<std::string>& reserved) {
  base::ParseJsonText(text, origin, "sweep spec");  // depth, ranges, malformed text: named
  SweepSpec spec;
  spec.origin = origin;
  spec.document = ordered_json::parse(text);  // again, keeping the spec's key order
  const ordered_json& doc = spec.document;
  if (!doc.is_object()) throw base::Error(origin + ": expected a JSON object (a sweep spec)");
  for (const auto& [key, value] : doc.items()) {
    if (key != "schema" && key != "command" && key != "options" && key != "grid") {
      throw base::Error(origin + ": " + key +
                        ": unknown field (expected schema, command, options, grid)");
    }
  }
  if (!doc.contains("schema") || doc["schema"] != kSpecSchema) {
    throw base::Error(origin + ": schema: expected \"" + kSpecSchema + "\"");
  }
  if (!doc.contains("command") || !doc["command"].is_string()) {
    throw base::Error(origin + ": command: expected a string, one of: " + Join(commands));
  }
  spec.command = doc["command"].get<std::string>();
  if (std::find(commands.begin(), commands.end(), spec.command) == commands.end()) {
    throw base::Error(
        origin + ": command: \"" + spec.command +
        "\" is not a sweepable prediction command; expected one of: " + Join(commands));
  }
  if (doc.contains("options")) {
    if (!doc["options"].is_object())
      throw base::Error(origin + ": options: expected an object of option -> value");
    for (const auto& [name, value] : doc["options"].items()) {
      CheckOptionName(name, origin, "options." + name, reserved);
      CheckScalar(value, origin, "options." + name);
      spec.options.emplace_back(name, value);
    }
  }
  if (!doc.contains("grid")) throw base::Error(origin + ": grid: missing (the swept options)");
  ReadGrid(doc["grid"], spec, reserved);
  spec.hash = HashText(doc.dump());
  return spec;
}

SweepSpec LoadSweepSpec(const std::string& path, const std::vector<std::string>& commands,
                        const std::vector<std::string>& reserved) {
  return ParseSweepSpec(base::ReadInputFile(path, base::kMaxJsonFileBytes, "sweep spec"), path,
                        commands, reserved);
}

}  // namespace moelab::sweep
