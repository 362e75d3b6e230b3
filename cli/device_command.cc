#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "device/gpu_devices.h"

namespace moelab::cli {
namespace {

int Devices(const std::vector<std::string>& args) {
  po::options_description options("moelab devices");
  options.add_options()("json", po::bool_switch(), "print JSON");
  po::variables_map values;
  if (!ParseOptions("usage: moelab devices [--json]", options, args, values)) return 0;
  const GpuInventory inventory = DetectGpus();
  if (values["json"].as<bool>()) {
    nlohmann::json devices = nlohmann::json::array();
    for (const GpuDevice& d : inventory.devices) {
      devices.push_back({{"index", d.index}, {"name", d.name}, {"memory_bytes", d.memory_bytes},
                         {"sm_count", d.sm_count},
                         {"compute_capability", std::to_string(d.compute_capability_major) + "." +
                                                    std::to_string(d.compute_capability_minor)}});
    }
    EmitJson({{"schema", "moelab.devices/1"}, {"cuda_compiled", inventory.cuda_compiled},
              {"cuda_runtime", inventory.runtime_version}, {"cuda_driver", inventory.driver_version},
              {"gpus", devices}, {"why_none", inventory.why_none}}, "");
    return 0;
  }
  if (inventory.devices.empty()) {
    std::cout << inventory.why_none << "\n";
    return 0;
  }
  for (const GpuDevice& d : inventory.devices) {
    std::cout << "GPU " << d.index << ": " << d.name << ", " << FormatBytes(d.memory_bytes) << ", "
              << d.sm_count << " SMs, compute capability " << d.compute_capability_major << "."
              << d.compute_capability_minor << "\n";
  }
  return 0;
}

}  // namespace

void RegisterDeviceCommands(std::vector<Command>& commands) {
  commands.push_back({{"devices"}, "the GPUs this machine has (CUDA builds)", Devices});
}

}  // namespace moelab::cli
