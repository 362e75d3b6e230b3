// moelab plan offload: each offload policy's TPOT (and TTFT, hit rate) across accelerator memory
// sizes, for one model, host and workload, from the offload simulator (plan/offload_sweep.h).
#include <optional>

#include "base/error.h"
#include "base/units.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/offload_sweep.h"
#include "plan/reports.h"

namespace moelab::cli {

std::optional<Printed> PlanOffloadPrinted(const std::vector<std::string>& args) {
  plan::OffloadSweepRequest request;
  sim::SimConfig& config = request.base;
  config.workload.prompt_tokens = 128;
  config.workload.output_tokens = 32;
  config.seed = 1;
  std::string model = "mixtral-8x7b", hardware = "rtx-3090";
  const auto gigabytes = [](const std::string& text) {
    std::vector<double> bytes;
    for (double gb : base::ParseNumberList(text, "memory")) {
      if (!(gb > 0))
        throw base::Error("--memory values must be > 0 GB, got " + FormatNumber(gb, 3));
      // The bound every memory size has (base/units.h): 1e300 GB printed an "inf GB" row.
      if (!(gb * 1e9 <= base::kMaxBytes)) {
        throw base::Error("--memory " + report::ShortestText(gb) +
                          ": expected at most 2^60 bytes (1.15e9 GB; docs/limits.md)");
      }
      bytes.push_back(gb * 1e9);
    }
    return bytes;
  };
  po::options_description options("moelab plan offload");
  // clang-format off
  options.add_options()
      ("model", Into(&model), "model preset or path")
      ("hardware", Into(&hardware), "accelerator preset (with its host and link)")
      ("memory", ParsedInto(&request.memory_bytes, "12,16,24,32,48,80", gigabytes), "accelerator memory sizes to try, GB (decimal)")
      ("policies", ParsedInto(&request.policies, "", [](const std::string& text) { return SplitNameList(text, "policies"); }), "comma-separated policies (default: every registered one)")
      ("workload", ParsedInto(&config.workload.kind, "decode", sim::WorkloadKindFromString), "decode | prefill | beam | batch | verify")
      ("prompt", Into(&config.workload.prompt_tokens), "prompt tokens")
      ("tokens", Into(&config.workload.output_tokens), "output tokens")
      ("batch", Into(&config.workload.batch), "requests for --workload batch")
      ("routing", ParsedInto(&config.routing, "uniform", routing::ParseRoutingSpec), "uniform | popularity:FILE | correlated:... | trace:FILE")
      ("seed", Into(&config.seed), "seed");
  // clang-format on
  AddOutputOptions(options);
  AddCostSourceOptions(options, ProfileRole::kBesideHardware);
  po::variables_map values;
  if (!ParseOptions(
          "usage: moelab plan offload --model M --hardware H|--profile FIT.json [--memory LIST] "
          "[--policies LIST] [--workload W] [--calibrate PROFILE.json] [--json|--csv]",
          options, args, values)) {
    return std::nullopt;
  }
  // Every policy is the default, not what an empty list says: --policies "" is refused.
  if (!values["policies"].defaulted() && request.policies.empty())
    throw base::Error("--policies '': expected one or more policy names");
  const model::PresetStore store = model::PresetStore::Default();
  request.cost = CostSourceOptionsFrom(values);
  // The simulator needs the accelerator and its host even when a fitted profile prices them.
  request.cost.hardware_given = false;
  config.model = store.LoadModel(model);
  config.hardware = store.LoadHardware(hardware);
  const OutputRequest output = OutputRequestFrom(values);
  return Printed{plan::Render(plan::SweepOffload(request, store), output.format), output.out, {}};
}

int PlanOffload(const std::vector<std::string>& args) {
  return EmitPrinted(PlanOffloadPrinted(args));
}

}  // namespace moelab::cli
