#include "model/preset_store.h"

#include <algorithm>
#include <cstdlib>
#include <regex>

#include "base/error.h"
#include "base/limits.h"
#include "model/hf_import.h"
#include "model/preset_cache.h"
#include "base/json_reader.h"

#ifndef MOELAB_PRESET_DIR
#error "MOELAB_PRESET_DIR must be defined by the build"
#endif

namespace moelab::model {
namespace fs = std::filesystem;
namespace {

constexpr const char* kHardwareSchema = "moelab.hardware/1";

struct HardwareFolder {
  const char* folder;
  const char* kind;
};
constexpr HardwareFolder kHardwareFolders[] = {
    {"accelerators", "accelerator"}, {"hosts", "host"}, {"links", "link"}, {"nodes", "node"}};

bool LooksLikePath(const std::string& value) {
  return value.find('/') != std::string::npos || value.ends_with(".json") ||
         fs::is_regular_file(value);
}

std::vector<fs::path> JsonFilesIn(const fs::path& folder) {
  std::vector<fs::path> files;
  if (!fs::is_directory(folder)) return files;
  for (const auto& entry : fs::directory_iterator(folder)) {
    if (entry.is_regular_file() && entry.path().extension() == ".json")
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string ReadDisplayName(const fs::path& file) {
  const nlohmann::json json = base::JsonReader::ParseFile(file);
  if (json.is_object() && json.contains("display_name") && json["display_name"].is_string()) {
    return json["display_name"].get<std::string>();
  }
  return file.stem().string();
}

// A node preset's optional "nodes" (machines, each of "count" accelerators) and "scale_out" (the
// network between the machines, required when there are several).
void AddScaleOut(const base::JsonReader& reader, HardwareSpec& node) {
  const int64_t machines =
      reader.Has("nodes") ? reader.Count("nodes", 1, base::kMaxMachinesPerNode) : 1;
  if (auto scale_out = reader.OptionalObject("scale_out")) {
    node.scale_out = InterconnectSpecFromJson(scale_out->json(), reader.origin(), "scale_out");
  } else if (machines > 1) {
    reader.Fail("scale_out",
                "an object {kind, bandwidth_bytes_per_s, latency_s}: the network joining the " +
                    std::to_string(machines) + " machines");
  }
  if (node.scale_out) {
    node.accelerators_per_node = node.accelerator_count;
    node.accelerator_count *= machines;
  }
}

// An accelerator's or an inline node's host, host link and interconnect (each optional).
template <typename HostFrom, typename LinkFrom>
void ReadComponents(const base::JsonReader& reader, HardwareSpec& spec, const HostFrom& host_from,
                    const LinkFrom& link_from) {
  if (reader.Has("host")) spec.host = host_from("host");
  if (reader.Has("host_link")) spec.host_link = link_from("host_link");
  if (auto interconnect = reader.OptionalObject("interconnect")) {
    spec.interconnect =
        InterconnectSpecFromJson(interconnect->json(), reader.origin(), "interconnect");
  }
}

// hw show --json's form of a node: every component inline and the counts as the spec holds them
// (accelerator_count in all, accelerators_per_node beside a scale_out), so that a shown node,
// edited (a faster NVLink, another count), reads back: it was refused ("field 'interconnect':
// expected a string").
template <typename HostFrom, typename LinkFrom>
HardwareSpec InlineNode(const base::JsonReader& reader, const HostFrom& host_from,
                        const LinkFrom& link_from) {
  HardwareSpec spec;
  spec.kind = HardwareKind::kNode;
  spec.accelerator =
      AcceleratorSpecFromJson(reader.Object("accelerator").json(), reader.origin(), "accelerator");
  // An accelerator's price is per accelerator, so it belongs inside "accelerator" here (the top
  // level is the node's, and a node preset takes its accelerator's).
  if (reader.Has("price_usd_per_hour"))
    reader.Fail("price_usd_per_hour", "inside \"accelerator\" in a node written inline");
  // The accelerator's own name (hw show writes it there; the top level names the node): a node
  // without it was shown as "8 x " with a blank name.
  if (spec.accelerator->display_name.empty()) {
    base::JsonReader(reader.json()["accelerator"], reader.origin(), "accelerator")
        .Fail("display_name", "the accelerator's name (the top level's names the node)");
  }
  spec.accelerator_count = reader.Count(
      "accelerator_count", 1, base::kMaxAcceleratorsPerMachine * base::kMaxMachinesPerNode);
  ReadComponents(reader, spec, host_from, link_from);
  if (auto scale_out = reader.OptionalObject("scale_out")) {
    spec.scale_out = InterconnectSpecFromJson(scale_out->json(), reader.origin(), "scale_out");
    spec.accelerators_per_node =
        reader.Count("accelerators_per_node", 1, base::kMaxAcceleratorsPerMachine);
    if (spec.accelerator_count % spec.accelerators_per_node != 0 ||
        spec.accelerator_count / spec.accelerators_per_node > base::kMaxMachinesPerNode) {
      reader.Fail("accelerator_count", "a whole number of machines of accelerators_per_node (" +
                                           std::to_string(spec.accelerators_per_node) +
                                           "), at most " +
                                           std::to_string(base::kMaxMachinesPerNode) + " of them");
    }
  } else if (reader.Has("accelerators_per_node")) {
    reader.Fail("accelerators_per_node", "only beside scale_out (a node of several machines)");
  } else if (spec.accelerator_count > base::kMaxAcceleratorsPerMachine) {
    reader.Fail(
        "accelerator_count",
        "at most " + std::to_string(base::kMaxAcceleratorsPerMachine) +
            " on one machine (a node of several gives scale_out and accelerators_per_node)");
  }
  if (spec.AcceleratorsPerMachine() > 1 && !spec.interconnect) {
    reader.Fail("interconnect",
                "an object {kind, bandwidth_bytes_per_s, latency_s}: the link "
                "between a machine's " +
                    std::to_string(spec.AcceleratorsPerMachine()) + " accelerators");
  }
  return spec;
}

}  // namespace

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string UnknownNameMessage(const std::string& what, const std::string& name,
                               const std::vector<std::string>& known,
                               const std::string& how_to_list) {
  std::vector<std::pair<size_t, std::string>> ranked;
  // Names that extend what was typed ("qwen3-30b" -> "qwen3-30b-a3b") rank first.
  for (const std::string& candidate : known) {
    const size_t distance = candidate.starts_with(name) ? 0 : EditDistance(name, candidate);
    ranked.emplace_back(distance, candidate);
  }
  std::sort(ranked.begin(), ranked.end());
  std::string message = "unknown " + what + " '" + name + "'";
  if (!ranked.empty()) {
    message += "; did you mean '" + ranked[0].second + "'";
    if (ranked.size() > 1 && ranked[1].first <= ranked[0].first + 1) {
      message += " or '" + ranked[1].second + "'";
    }
    message += "?";
  }
  return message + " (" + how_to_list + " lists them all)";
}

PresetStore::PresetStore(fs::path root) : root_(std::move(root)) {}

PresetStore PresetStore::Default() {
  if (const char* env = std::getenv("MOELAB_PRESETS"); env != nullptr && *env != '\0') {
    return PresetStore(env);
  }
  return PresetStore(MOELAB_PRESET_DIR);
}

std::vector<PresetEntry> PresetStore::ListModels() const {
  std::vector<PresetEntry> entries;
  for (const fs::path& file : JsonFilesIn(root_ / "models")) {
    entries.push_back({file.stem().string(), "model", ReadDisplayName(file), file});
  }
  return entries;
}

std::vector<PresetEntry> PresetStore::ListHardware() const {
  std::vector<PresetEntry> entries;
  for (const HardwareFolder& folder : kHardwareFolders) {
    for (const fs::path& file : JsonFilesIn(root_ / "hardware" / folder.folder)) {
      entries.push_back({file.stem().string(), folder.kind, ReadDisplayName(file), file});
    }
  }
  return entries;
}

MoeModelSpec PresetStore::LoadModel(const std::string& name_or_path) const {
  return preset_cache::Model(root_.string() + '\n' + name_or_path,
                             [&] { return LoadModelFromDisk(name_or_path); });
}

HardwareSpec PresetStore::LoadHardware(const std::string& name_or_path) const {
  return preset_cache::Hardware(root_.string() + '\n' + name_or_path,
                                [&] { return LoadHardwareFromDisk(name_or_path); });
}

MoeModelSpec PresetStore::LoadModelFromDisk(const std::string& name_or_path) const {
  fs::path file;
  if (LooksLikePath(name_or_path)) {
    file = name_or_path;
    if (!fs::is_regular_file(file)) throw base::Error(name_or_path + ": model file not found");
  } else {
    file = root_ / "models" / (name_or_path + ".json");
    if (!fs::is_regular_file(file)) {
      std::vector<std::string> known;
      for (const PresetEntry& entry : ListModels()) known.push_back(entry.name);
      throw base::Error(
          UnknownNameMessage("model preset", name_or_path, known, "'moelab model list'"));
    }
  }
  const nlohmann::json json = base::JsonReader::ParseFile(file);
  if (json.is_object() && json.contains("model_type") && !json.contains("schema")) {
    return ImportHuggingFaceConfig(json, file.string());
  }
  if (json.is_object() && !json.contains("schema") && !json.contains("model_type")) {
    // Neither kind of model file: say what each needs instead of blaming only the missing schema.
    throw base::Error(
        file.string() +
        ": neither a Hugging Face config (missing field 'model_type', e.g. \"mixtral\") "
        "nor a moelab model file (missing field 'schema': \"moelab.model/1\")");
  }
  MoeModelSpec spec = ModelSpecFromJson(json, file.string());
  return spec;
}

fs::path PresetStore::FindHardwareFile(const std::string& name, const std::string& folder,
                                       const std::string& kind_label) const {
  const fs::path file = root_ / "hardware" / folder / (name + ".json");
  if (fs::is_regular_file(file)) return file;
  std::vector<std::string> known;
  for (const fs::path& candidate : JsonFilesIn(root_ / "hardware" / folder)) {
    known.push_back(candidate.stem().string());
  }
  throw base::Error(UnknownNameMessage(kind_label + " preset", name, known, "'moelab hw list'"));
}

HardwareSpec PresetStore::LoadHardwareFromDisk(const std::string& name_or_path) const {
  if (LooksLikePath(name_or_path)) {
    if (!fs::is_regular_file(name_or_path))
      throw base::Error(name_or_path + ": hardware file not found");
    return HardwareFromFile(name_or_path);
  }
  for (const HardwareFolder& folder : kHardwareFolders) {
    const fs::path file = root_ / "hardware" / folder.folder / (name_or_path + ".json");
    if (fs::is_regular_file(file)) return HardwareFromFile(file);
  }
  static const std::regex kComposed(R"(([0-9]+)x(.+))");
  std::smatch match;
  if (std::regex_match(name_or_path, match, kComposed)) {
    const std::string accelerator = match[2].str();
    const fs::path file = root_ / "hardware" / "accelerators" / (accelerator + ".json");
    if (fs::is_regular_file(file)) {
      // More digits than any count in range: out of range, not std::stoll's overflow.
      const int64_t count = match[1].length() > 9 ? -1 : std::stoll(match[1].str());
      if (count < 1 || count > base::kMaxAcceleratorsPerMachine) {
        throw base::Error("hardware '" + name_or_path + "': accelerator count must be 1.." +
                          std::to_string(base::kMaxAcceleratorsPerMachine));
      }
      const HardwareSpec base = HardwareFromFile(file);
      // An NVLink bridge joins a pair of cards; beyond two, peers talk over PCIe.
      const bool nvlink =
          base.interconnect &&
          (count <= 2 || base.interconnect->kind.find("bridge") == std::string::npos);
      return ComposeNode(name_or_path, std::to_string(count) + " x " + base.display_name,
                         accelerator, count, nvlink ? "nvlink" : "pcie",
                         "hardware '" + name_or_path + "'");
    }
  }
  std::vector<std::string> known;
  for (const PresetEntry& entry : ListHardware()) known.push_back(entry.name);
  throw base::Error(UnknownNameMessage("hardware preset", name_or_path, known, "'moelab hw list'"));
}

HardwareSpec PresetStore::HardwareFromFile(const fs::path& file) const {
  return HardwareFromJson(base::JsonReader::ParseFile(file), file.string());
}

HardwareSpec PresetStore::ComposeNode(const std::string& name, const std::string& display_name,
                                      const std::string& accelerator, int64_t count,
                                      const std::string& interconnect,
                                      const std::string& origin) const {
  HardwareSpec node =
      HardwareFromFile(FindHardwareFile(accelerator, "accelerators", "accelerator"));
  node.name = name;
  node.display_name = display_name;
  node.kind = HardwareKind::kNode;
  node.accelerator_count = count;
  if (interconnect == "pcie") {
    if (!node.host_link)
      throw base::Error(origin + ": interconnect \"pcie\" needs the accelerator's host_link");
    // Peer traffic without NVLink crosses the host's PCIe root: one link's bandwidth per GPU.
    node.interconnect = InterconnectSpec{
        "pcie", node.host_link->host_to_device_bandwidth_bytes_per_s, node.host_link->latency_s};
  } else if (interconnect == "nvlink") {
    if (!node.interconnect) {
      throw base::Error(origin + ": field 'interconnect': \"nvlink\" but accelerator '" +
                        accelerator + "' has no NVLink; use \"pcie\"");
    }
  } else {
    throw base::Error(origin + ": field 'interconnect': expected \"nvlink\" or \"pcie\", got \"" +
                      interconnect + "\"");
  }
  return node;
}

HardwareSpec PresetStore::HardwareFromJson(const nlohmann::json& json,
                                           const std::string& origin) const {
  const base::JsonReader reader(json, origin);
  const std::string schema = reader.String("schema");
  if (schema != kHardwareSchema) reader.Fail("schema", std::string("\"") + kHardwareSchema + "\"");
  const std::string kind = reader.String("kind");
  const std::string name = reader.String("name");
  const std::string display_name = reader.String("display_name", name);
  std::vector<std::string> sources;
  if (reader.Has("sources")) {
    const nlohmann::json& list = json["sources"];
    if (!list.is_array()) reader.Fail("sources", "an array of strings");
    for (const auto& item : list) {
      if (!item.is_string()) reader.Fail("sources", "an array of strings");
      sources.push_back(item.get<std::string>());
    }
  }

  // A component is either a preset name (a string) or an inline object.
  auto component = [&](std::string_view key, const char* folder, const char* kind_label,
                       const char* inline_key) -> std::pair<nlohmann::json, std::string> {
    const nlohmann::json& value = json[std::string(key)];
    if (value.is_string()) {
      const fs::path file = FindHardwareFile(value.get<std::string>(), folder, kind_label);
      const nlohmann::json referenced = base::JsonReader::ParseFile(file);
      const base::JsonReader referenced_reader(referenced, file.string());
      return {referenced_reader.Object(inline_key).json(), file.string()};
    }
    if (!value.is_object())
      reader.Fail(key, std::string("a ") + kind_label + " preset name or an object");
    return {value, origin};
  };
  auto host_from = [&](std::string_view key) {
    auto [host_json, host_origin] = component(key, "hosts", "host", "host");
    HostSpec host =
        HostSpecFromJson(host_json, host_origin, host_origin == origin ? std::string(key) : "host");
    // The preset named, else the name an inline object gives (hw show's), else the file's.
    if (json[std::string(key)].is_string()) {
      host.name = json[std::string(key)].get<std::string>();
    } else if (host.name.empty()) {
      host.name = name;
    }
    return host;
  };
  auto link_from = [&](std::string_view key) {
    auto [link_json, link_origin] = component(key, "links", "link", "link");
    LinkSpec link =
        LinkSpecFromJson(link_json, link_origin, link_origin == origin ? std::string(key) : "link");
    if (json[std::string(key)].is_string()) {
      link.name = json[std::string(key)].get<std::string>();
    } else if (link.name.empty()) {
      link.name = name;
    }
    return link;
  };

  HardwareSpec spec;
  if (kind == "accelerator") {
    spec.kind = HardwareKind::kAccelerator;
    spec.accelerator =
        AcceleratorSpecFromJson(reader.Object("accelerator").json(), origin, "accelerator");
    spec.accelerator_count = 1;
    // hw show --json writes the count (1) of an accelerator; another count is a node's to give,
    // never read as 1 without a word.
    if (reader.Has("accelerator_count") && reader.Int("accelerator_count", 1) != 1)
      reader.Fail("accelerator_count", "1 for kind \"accelerator\" (a \"node\" gives a count)");
    if (reader.Has("price_usd_per_hour")) {
      // hw show writes the price inside "accelerator"; a file giving it in both places is unclear.
      if (spec.accelerator->price_usd_per_hour)
        reader.Fail("price_usd_per_hour", "one price: accelerator.price_usd_per_hour is given too");
      spec.accelerator->price_usd_per_hour = reader.Number("price_usd_per_hour", 0);
      spec.accelerator->price_source = reader.String("price_source");
    }
    ReadComponents(reader, spec, host_from, link_from);
    spec.compute_device_is_host = reader.Bool("compute_device_is_host", false);
    if (spec.compute_device_is_host && !spec.host) {
      reader.Fail("compute_device_is_host", "false unless the hardware has a \"host\"");
    }
  } else if (kind == "node" && json.contains("accelerator") && json["accelerator"].is_object()) {
    spec = InlineNode(reader, host_from, link_from);
  } else if (kind == "host") {
    spec.kind = HardwareKind::kHost;
    reader.Object("host");
    spec.host = host_from("host");
    spec.host->name = name;
  } else if (kind == "link") {
    spec.kind = HardwareKind::kLink;
    reader.Object("link");
    spec.host_link = link_from("link");
    spec.host_link->name = name;
  } else if (kind == "node") {
    spec = ComposeNode(name, display_name, reader.String("accelerator"),
                       reader.Count("count", 1, base::kMaxAcceleratorsPerMachine),
                       reader.String("interconnect"), origin);
    AddScaleOut(reader, spec);
  } else {
    reader.Fail("kind", "one of \"accelerator\", \"host\", \"link\", \"node\"");
  }
  // A misspelt or misplaced top-level field was ignored (a node's "scale_out" in an accelerator
  // file, "sm_count" beside "accelerator" instead of in it). The component objects check their
  // own (hardware_spec.cc).
  reader.RefuseUnknownFields(kHardwareSchema);
  spec.name = name;
  spec.display_name = display_name;
  // An accelerator file's display name is its accelerator's (hw show writes both, the same).
  if (spec.kind == HardwareKind::kAccelerator) spec.accelerator->display_name = display_name;
  if (!sources.empty() || spec.sources.empty()) spec.sources = sources;
  return spec;
}

}  // namespace moelab::model
