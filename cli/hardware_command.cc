#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "base/error.h"
#include "model/preset_store.h"

namespace moelab::cli {
namespace {

std::string Tflops(const PeakFlops& peak, const std::string& dtype) {
  auto it = peak.find(dtype);
  return it == peak.end() ? "-" : FormatNumber(it->second / 1e12, 1);
}

int HardwareList(const std::vector<std::string>& args) {
  po::options_description options("moelab hw list");
  options.add_options()("json", po::bool_switch(), "print JSON");
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw list [--json]", options, args, values)) return 0;
  const PresetStore store = PresetStore::Default();
  nlohmann::json list = nlohmann::json::array();
  Table table({"name", "kind", "display name", "bf16/fp16 TFLOP/s", "memory", "bandwidth"});
  for (const PresetEntry& entry : store.ListHardware()) {
    const HardwareSpec spec = store.LoadHardware(entry.file.string());
    list.push_back({{"name", entry.name}, {"kind", entry.kind}, {"display_name", spec.display_name},
                    {"file", entry.file.string()}});
    std::string flops = "-", memory = "-", bandwidth = "-";
    if (spec.has_accelerator()) {
      const AcceleratorSpec& a = *spec.accelerator;
      const double count = static_cast<double>(spec.accelerator_count);
      flops = Tflops(a.peak_flops, "bf16") != "-" ? Tflops(a.peak_flops, "bf16") : Tflops(a.peak_flops, "fp16");
      if (spec.accelerator_count > 1) flops = std::to_string(spec.accelerator_count) + " x " + flops;
      memory = FormatBytes(a.memory_bytes * count);
      bandwidth = FormatBytes(a.memory_bandwidth_bytes_per_s * count) + "/s";
    } else if (spec.host) {
      flops = Tflops(spec.host->peak_flops, "bf16") != "-" ? Tflops(spec.host->peak_flops, "bf16")
                                                          : Tflops(spec.host->peak_flops, "fp32") + " (fp32)";
      memory = FormatBytes(spec.host->dram_bytes);
      bandwidth = FormatBytes(spec.host->dram_bandwidth_bytes_per_s) + "/s";
    } else if (spec.host_link) {
      bandwidth = FormatBytes(spec.host_link->host_to_device_bandwidth_bytes_per_s) + "/s";
    }
    table.AddRow({entry.name, entry.kind, spec.display_name, flops, memory, bandwidth});
  }
  if (values["json"].as<bool>()) {
    EmitJson({{"schema", "moelab.hardware_list/1"}, {"hardware", list}}, "");
  } else {
    std::cout << table.Render()
              << "\nAny accelerator composes into a node as <N>x<name>, e.g. 2xa100-80gb-sxm.\n";
  }
  return 0;
}

int HardwareShow(const std::vector<std::string>& args) {
  po::options_description options("moelab hw show");
  options.add_options()
      ("hardware", po::value<std::string>()->required(), "hardware preset name or path")
      ("json", po::bool_switch(), "print JSON");
  po::positional_options_description positional;
  positional.add("hardware", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw show NAME|PATH [--json]", options, args, values, &positional)) return 0;
  const HardwareSpec spec = PresetStore::Default().LoadHardware(values["hardware"].as<std::string>());
  if (values["json"].as<bool>()) {
    nlohmann::json json = HardwareSpecToJson(spec);
    EmitJson(json, "");
    return 0;
  }
  std::cout << spec.display_name << " (" << spec.name << ", " << ToString(spec.kind) << ")\n";
  Table table({"quantity", "value"});
  if (spec.accelerator) {
    const AcceleratorSpec& a = *spec.accelerator;
    table.AddRow({"accelerators", std::to_string(spec.accelerator_count) + " x " + a.display_name});
    for (const auto& [dtype, flops] : a.peak_flops) table.AddRow({"peak " + dtype, FormatNumber(flops / 1e12, 1) + " TFLOP/s"});
    table.AddRow({"memory (each)", FormatBytes(a.memory_bytes)});
    table.AddRow({"memory bandwidth (each)", FormatBytes(a.memory_bandwidth_bytes_per_s) + "/s"});
  }
  if (spec.interconnect && spec.accelerator_count > 1) {
    table.AddRow({"interconnect", spec.interconnect->kind + ", " + FormatBytes(spec.interconnect->bandwidth_bytes_per_s) + "/s per direction"});
  }
  if (spec.host) {
    const HostSpec& h = *spec.host;
    table.AddRow({"host CPU", h.cpu_name + ", " + std::to_string(h.cores) + " cores"});
    for (const auto& [dtype, flops] : h.peak_flops) table.AddRow({"host peak " + dtype, FormatNumber(flops / 1e12, 2) + " TFLOP/s"});
    table.AddRow({"host DRAM", FormatBytes(h.dram_bytes) + " at " + FormatBytes(h.dram_bandwidth_bytes_per_s) + "/s"});
    table.AddRow({"storage read", FormatBytes(h.storage_read_bandwidth_bytes_per_s) + "/s"});
  }
  if (spec.host_link) {
    const LinkSpec& l = *spec.host_link;
    table.AddRow({"host link", l.name + ": " + FormatBytes(l.host_to_device_bandwidth_bytes_per_s) + "/s H2D, " +
                                   FormatBytes(l.device_to_host_bandwidth_bytes_per_s) + "/s D2H, " + FormatSeconds(l.latency_s)});
  }
  std::cout << table.Render();
  for (const std::string& source : spec.sources) std::cout << "source: " << source << "\n";
  return 0;
}

}  // namespace

void RegisterHardwareCommands(std::vector<Command>& commands) {
  commands.push_back({{"hw", "list"}, "the hardware presets", HardwareList});
  commands.push_back({{"hw", "show"}, "one hardware preset or file", HardwareShow});
}

}  // namespace moelab::cli
