// moelab plan offload: each offload policy's TPOT (and TTFT, hit rate) across accelerator memory
// sizes, for one model, host and workload, from the offload simulator.
#include <cmath>
#include <iostream>
#include <sstream>

#include "cli/calibration_options.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "base/error.h"
#include "model/preset_store.h"
#include "policies/registry.h"
#include "sim/offload_simulator.h"

namespace moelab::cli {
namespace {

int PlanOffload(const std::vector<std::string>& args) {
  po::options_description options("moelab plan offload");
  options.add_options()
      ("model", po::value<std::string>()->default_value("mixtral-8x7b"), "model preset or path")
      ("hardware", po::value<std::string>()->default_value("rtx-3090"), "accelerator preset (with its host and link)")
      ("memory", po::value<std::string>()->default_value("12,16,24,32,48,80"), "accelerator memory sizes to try, GB (decimal)")
      ("policies", po::value<std::string>()->default_value(""), "comma-separated policies (default: every registered one)")
      ("workload", po::value<std::string>()->default_value("decode"), "decode | prefill | beam | batch | verify")
      ("prompt", po::value<int64_t>()->default_value(128), "prompt tokens")
      ("tokens", po::value<int64_t>()->default_value(32), "output tokens")
      ("batch", po::value<int64_t>()->default_value(1), "requests for --workload batch")
      ("routing", po::value<std::string>()->default_value("uniform"), "uniform | popularity:FILE | correlated:... | trace:FILE")
      ("seed", po::value<uint64_t>()->default_value(1), "seed")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON to this file (atomically)");
  AddCalibrationOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan offload --model M --hardware H [--memory LIST] [--policies LIST] [--workload W] "
                    "[--calibrate PROFILE.json] [--json]",
                    options, args, values)) {
    return 0;
  }
  const std::vector<double> memory_gb = ParseNumberList(values["memory"].as<std::string>(), "memory");
  for (double gb : memory_gb) {
    if (!(gb > 0)) throw Error("--memory values must be > 0 GB, got " + FormatNumber(gb, 3));
  }
  std::vector<std::string> policy_names;
  if (values["policies"].as<std::string>().empty()) {
    policy_names = policies::DefaultPolicyRegistry().Names();
  } else {
    std::stringstream list(values["policies"].as<std::string>());
    std::string name;
    while (std::getline(list, name, ',')) {
      policies::DefaultPolicyRegistry().Find(name);  // unknown: error listing the valid ones
      policy_names.push_back(name);
    }
  }
  const PresetStore store = PresetStore::Default();
  sim::SimConfig base;
  base.model = store.LoadModel(values["model"].as<std::string>());
  base.hardware = store.LoadHardware(values["hardware"].as<std::string>());
  base.workload.kind = sim::WorkloadKindFromString(values["workload"].as<std::string>());
  base.workload.prompt_tokens = values["prompt"].as<int64_t>();
  base.workload.output_tokens = values["tokens"].as<int64_t>();
  base.workload.batch = values["batch"].as<int64_t>();
  base.routing = values["routing"].as<std::string>();
  base.seed = values["seed"].as<uint64_t>();
  base.Validate();
  RefuseExplicitEfficiencies(values);
  const std::vector<CostCalibration> calibrations = CalibrateSimCosts(values, store, base);

  nlohmann::json rows = nlohmann::json::array();
  std::vector<std::string> header = {"memory"};
  for (const std::string& name : policy_names) header.push_back(name);
  Table table(header);
  for (double gb : memory_gb) {
    std::vector<std::string> cells = {FormatNumber(gb, 0) + " GB"};
    for (const std::string& name : policy_names) {
      sim::SimConfig config = base;
      config.policy = name;
      config.accelerator_bytes = gb * 1e9;
      nlohmann::json row = {{"memory_bytes", gb * 1e9}, {"policy", name}};
      try {
        const sim::SimResult result = sim::SimulateOffload(config);
        row["tpot_s"] = result.tpot_s ? nlohmann::json(*result.tpot_s) : nlohmann::json(nullptr);
        row["ttft_s"] = result.ttft_s;
        row["hit_rate"] = result.hit_rate();
        row["fits"] = result.fits_accelerator;
        cells.push_back(result.fits_accelerator ? (result.tpot_s ? FormatSeconds(*result.tpot_s) : FormatSeconds(result.ttft_s))
                                                : "no fit");
      } catch (const Error& e) {
        // A configuration the policy cannot run at this size (e.g. too little memory for its cache).
        row["error"] = e.what();
        cells.push_back("-");
      }
      rows.push_back(row);
    }
    table.AddRow(cells);
  }
  const std::string out = values["out"].as<std::string>();
  if (values["json"].as<bool>() || !out.empty()) {
    nlohmann::json json = {{"schema", "moelab.plan_offload/1"}, {"model", base.model.name}, {"hardware", base.hardware.name},
                           {"workload", values["workload"].as<std::string>()}, {"routing", base.routing},
                           {"cost_source", base.cost_source}, {"rows", rows}};
    for (const CostCalibration& calibration : calibrations) json["cost_calibrations"].push_back(calibration.ToJson());
    json["provenance"] = Provenance();
    EmitJson(json, out);
    return 0;
  }
  std::cout << "Offload policies for " << base.model.name << " on " << base.hardware.display_name << " ("
            << values["workload"].as<std::string>() << ", routing " << base.routing
            << "): TPOT by accelerator memory (TTFT for prefill; '-' = the policy cannot run at that size), cost source "
            << base.cost_source << "\n\n"
            << table.Render();
  for (const CostCalibration& calibration : calibrations) std::cout << "Calibration: " << calibration.Summary() << "\n";
  return 0;
}

}  // namespace

void RegisterPlanOffloadCommands(std::vector<Command>& commands) {
  commands.push_back({{"plan", "offload"}, "each offload policy's TPOT across accelerator memory sizes", PlanOffload});
}

}  // namespace moelab::cli
