#include "base/error.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "base/units.h"
#include "executor/offload/offload_runtime.h"
#include "fit/storage_tier_hardware.h"
#include "model/describe.h"

namespace moelab::cli {

int HardwareList(const std::vector<std::string>& args) {
  po::options_description options("moelab hw list");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw list [--json|--csv]", options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const model::PresetListing listing = model::ListHardwarePresets(model::PresetStore::Default());
  EmitResult(output,
             {{"schema", "moelab.hardware_list/1"},
              {"hardware", listing.presets},
              {"provenance", Provenance()}},
             listing.text, report::JsonArrayRows(listing.presets));
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
  EmitResult(output, model::HardwareSpecToJson(spec), model::HardwareText(spec));
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
      "unit)")(
      "reads-in-flight",
      po::value<int64_t>()->default_value(executor::offload::OffloadOptions{}.reader_threads),
      "reads the executor's offload reader keeps in flight (moelab run --offload-readers); "
      "they share the storage bandwidth")(
      "storage-read-bandwidth", po::value<std::string>(),
      "the reader's bandwidth measured when the runs being priced ran, in bytes/s (e.g. "
      "moelab run --offload stream-all --json's offload.copy_bytes_per_s): replaces the "
      "profile's expert_reader samples, alone and beside computation (a cloud disk's speed "
      "drifts within minutes)");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("profile", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab hw from-profile PROFILE.json --memory BYTES "
                    "[--reads-in-flight N] [--storage-read-bandwidth B] [--json|--csv] "
                    "[--out HW.json]",
                    options, args, values, &positional)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  double storage_read_bytes_per_s = 0;
  if (values.count("storage-read-bandwidth")) {
    const std::string text = values["storage-read-bandwidth"].as<std::string>();
    storage_read_bytes_per_s = base::ParseNumber(text, "storage-read-bandwidth");
    // 1 kB/s to 1 PB/s: beyond every disk either way, and an expert's read time stays a finite,
    // printable number of seconds.
    if (!(storage_read_bytes_per_s >= 1e3 && storage_read_bytes_per_s <= 1e15)) {
      throw base::Error("--storage-read-bandwidth " + text +
                        ": expected bytes per second from 1e3 to 1e15");
    }
  }
  const model::HardwareSpec spec = fit::StorageTierHardwareFromProfile(
      fit::LoadProfile(values["profile"].as<std::string>()),
      base::ParseBytes(values["memory"].as<std::string>(), "--memory"), storage_read_bytes_per_s,
      values["reads-in-flight"].as<int64_t>());
  EmitResult(output, model::HardwareSpecToJson(spec), model::HardwareText(spec));
  return 0;
}

}  // namespace moelab::cli
