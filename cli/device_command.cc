#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "device/gpu_devices.h"

namespace moelab::cli {
namespace {

int Devices(const std::vector<std::string>& args) {
  po::options_description options("moelab devices");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab devices [--json|--csv]", options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const device::GpuInventory inventory = device::DetectGpus();
  report::RowSet gpus({{"index", "index"},
                       {"name", "name"},
                       {"memory_bytes", "memory_bytes"},
                       {"sm_count", "sm_count"},
                       {"compute_capability", "compute_capability"}});
  for (const device::GpuDevice& d : inventory.devices) {
    gpus.Add({int64_t{d.index}, d.name, d.memory_bytes, int64_t{d.sm_count},
              std::to_string(d.compute_capability_major) + "." +
                  std::to_string(d.compute_capability_minor)});
  }
  if (output.format != Format::kTable) {
    EmitJsonOrCsv(output,
                  {{"schema", "moelab.devices/1"},
                   {"cuda_compiled", inventory.cuda_compiled},
                   {"cuda_runtime", inventory.runtime_version},
                   {"cuda_driver", inventory.driver_version},
                   {"gpus", gpus.ToJson()},
                   {"why_none", inventory.why_none}},
                  gpus);
    return 0;
  }
  if (inventory.devices.empty()) {
    std::cout << inventory.why_none << "\n";
    return 0;
  }
  for (const device::GpuDevice& d : inventory.devices) {
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
