#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/describe.h"

namespace moelab::cli {
namespace {

int HardwareList(const std::vector<std::string>& args) {
  po::options_description options("moelab hw list");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw list [--json|--csv]", options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const PresetListing listing = ListHardwarePresets(PresetStore::Default());
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
  options.add_options()
      ("hardware", po::value<std::string>()->required(), "hardware preset name or path");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("hardware", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw show NAME|PATH [--json|--csv]", options, args, values, &positional)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const HardwareSpec spec = PresetStore::Default().LoadHardware(values["hardware"].as<std::string>());
  if (output.format == Format::kTable) {
    std::cout << HardwareText(spec);
  } else {
    EmitJsonOrCsv(output, HardwareSpecToJson(spec));
  }
  return 0;
}

}  // namespace

void RegisterHardwareCommands(std::vector<Command>& commands) {
  commands.push_back({{"hw", "list"}, "the hardware presets", HardwareList});
  commands.push_back({{"hw", "show"}, "one hardware preset or file", HardwareShow});
}

}  // namespace moelab::cli
