// moelab plan offload: each offload policy's TPOT (and TTFT, hit rate) across accelerator memory
// sizes, for one model, host and workload, from the offload simulator (plan/offload_sweep.h).
#include <sstream>

#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/offload_sweep.h"
#include "plan/reports.h"

namespace moelab::cli {
namespace {

int PlanOffload(const std::vector<std::string>& args) {
  po::options_description options("moelab plan offload");
  options.add_options()("model", po::value<std::string>()->default_value("mixtral-8x7b"),
                        "model preset or path")("hardware",
                                                po::value<std::string>()->default_value("rtx-3090"),
                                                "accelerator preset (with its host and link)")(
      "memory", po::value<std::string>()->default_value("12,16,24,32,48,80"),
      "accelerator memory sizes to try, GB (decimal)")(
      "policies", po::value<std::string>()->default_value(""),
      "comma-separated policies (default: every registered one)")(
      "workload", po::value<std::string>()->default_value("decode"),
      "decode | prefill | beam | batch | verify")(
      "prompt", po::value<int64_t>()->default_value(128), "prompt tokens")(
      "tokens", po::value<int64_t>()->default_value(32), "output tokens")(
      "batch", po::value<int64_t>()->default_value(1), "requests for --workload batch")(
      "routing", po::value<std::string>()->default_value("uniform"),
      "uniform | popularity:FILE | correlated:... | trace:FILE")(
      "seed", po::value<uint64_t>()->default_value(1), "seed");
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan offload --model M --hardware H|--profile FIT.json "
                    "[--memory LIST] [--policies LIST] [--workload W] "
                    "[--calibrate PROFILE.json] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  plan::OffloadSweepRequest request;
  for (double gb : base::ParseNumberList(values["memory"].as<std::string>(), "memory")) {
    if (!(gb > 0)) throw base::Error("--memory values must be > 0 GB, got " + FormatNumber(gb, 3));
    request.memory_bytes.push_back(gb * 1e9);
  }
  std::stringstream list(values["policies"].as<std::string>());
  for (std::string name; std::getline(list, name, ',');) request.policies.push_back(name);
  const model::PresetStore store = model::PresetStore::Default();
  request.cost = CostSourceOptionsFrom(values);
  // The simulator needs the accelerator and its host even when a fitted profile prices them.
  request.cost.hardware_given = false;
  sim::SimConfig& base = request.base;
  base.model = store.LoadModel(values["model"].as<std::string>());
  base.hardware = store.LoadHardware(values["hardware"].as<std::string>());
  base.cost = request.cost.assumed;
  base.workload.kind = sim::WorkloadKindFromString(values["workload"].as<std::string>());
  base.workload.prompt_tokens = values["prompt"].as<int64_t>();
  base.workload.output_tokens = values["tokens"].as<int64_t>();
  base.workload.batch = values["batch"].as<int64_t>();
  base.routing = routing::ParseRoutingSpec(values["routing"].as<std::string>());
  base.seed = values["seed"].as<uint64_t>();
  const OutputRequest output = OutputRequestFrom(values);
  report::Emit(plan::Render(plan::SweepOffload(request, store), output.format), output.out);
  return 0;
}

}  // namespace

void RegisterPlanOffloadCommands(std::vector<Command>& commands) {
  commands.push_back({{"plan", "offload"},
                      "each offload policy's TPOT across accelerator memory sizes",
                      PlanOffload});
}

}  // namespace moelab::cli
