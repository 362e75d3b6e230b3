#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "base/units.h"
#include "fit/storage_tier_hardware.h"
#include "model/describe.h"

namespace moelab::cli {
namespace {

int HardwareList(const std::vector<std::string>& args) {
  po::options_description options("moelab hw list");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw list [--json|--csv]", options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const model::PresetListing listing = model::ListHardwarePresets(model::PresetStore::Default());
  if (output.format == Format::kTable) {
    std::cout << listing.text;
  } else {
    EmitJsonOrCsv(output, {{"schema", "moelab.hardware_list/1"}, {"hardware", listing.presets}},
                  report::JsonArrayRows(listing.presets));
  }
  return 0;
}

int HardwareShow(const std::vector<std::string>& args) {
  po::options_description options("moelab hw show");
  options.add_options()("hardware", po::value<std::string>()->required(),
                        "hardware preset name or path");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("hardware", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw show NAME|PATH [--json|--csv]", options, args, values,
                    &positional))
    return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const model::HardwareSpec spec =
      model::PresetStore::Default().LoadHardware(values["hardware"].as<std::string>());
  if (output.format == Format::kTable) {
    std::cout << model::HardwareText(spec);
  } else {
    EmitJsonOrCsv(output, model::HardwareSpecToJson(spec));
  }
  return 0;
}

// The machine at hand for `sim offload` when the executor offloads experts to storage: the CPU as
// the compute device, storage as its link (fit/storage_tier_hardware.h).
int HardwareFromProfile(const std::vector<std::string>& args) {
  po::options_description options("moelab hw from-profile");
  options.add_options()("profile", po::value<std::string>()->required(),
                        "a profile of this machine (moelab profile) with storage_read samples")(
      "memory", po::value<std::string>()->required(),
      "RAM the run may use: non-expert weights, KV cache and the expert budget (bytes or with a "
      "unit)");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("profile", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw from-profile PROFILE.json --memory BYTES [--json|--csv] "
                    "[--out HW.json]",
                    options, args, values, &positional)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  const model::HardwareSpec spec = fit::StorageTierHardwareFromProfile(
      fit::LoadProfile(values["profile"].as<std::string>()),
      base::ParseBytes(values["memory"].as<std::string>(), "--memory"));
  if (output.format == Format::kTable) {
    std::cout << model::HardwareText(spec);
  } else {
    EmitJsonOrCsv(output, model::HardwareSpecToJson(spec));
  }
  return 0;
}

}  // namespace

void RegisterHardwareCommands(std::vector<Command>& commands) {
  commands.push_back({{"hw", "list"}, "the hardware presets", HardwareList});
  commands.push_back({{"hw", "show"}, "one hardware preset or file", HardwareShow});
  commands.push_back({{"hw", "from-profile"},
                      "this machine for sim offload: the CPU computes, experts on storage",
                      HardwareFromProfile});
}

}  // namespace moelab::cli
