#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "device/gpu_devices.h"

namespace moelab::cli {

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
  std::string text = inventory.devices.empty() ? inventory.why_none + "\n" : "";
  for (const device::GpuDevice& d : inventory.devices) {
    text += "GPU " + std::to_string(d.index) + ": " + d.name + ", " + FormatBytes(d.memory_bytes) +
            ", " + std::to_string(d.sm_count) + " SMs, compute capability " +
            std::to_string(d.compute_capability_major) + "." +
            std::to_string(d.compute_capability_minor) + "\n";
  }
  EmitResult(output,
             {{"schema", "moelab.devices/1"},
              {"cuda_compiled", inventory.cuda_compiled},
              {"cuda_runtime", inventory.runtime_version},
              {"cuda_driver", inventory.driver_version},
              {"gpus", gpus.ToJson()},
              {"why_none", inventory.why_none},
              {"provenance", Provenance()}},
             text, gpus);
  return 0;
}

}  // namespace moelab::cli
