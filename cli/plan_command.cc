// moelab plan sd and moelab plan hardware: parse, run the planner (plan/), print.
#include <iostream>
#include <optional>

#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/hardware_search.h"
#include "plan/reports.h"
#include "plan/sd_sweep.h"

namespace moelab::cli {
namespace {

constexpr const char* kDefaultTarget = "qwen2-57b-a14b";
constexpr const char* kDefaultDraft = "qwen2-0.5b";
constexpr const char* kDefaultHardware = "2xa100-80gb-sxm";

int PlanSd(const std::vector<std::string>& args) {
  po::options_description options("moelab plan sd");
  options.add_options()("model", po::value<std::string>()->default_value(kDefaultTarget),
                        "target model preset or path")(
      "draft", po::value<std::string>()->default_value(kDefaultDraft),
      "draft model preset or path")("hardware",
                                    po::value<std::string>()->default_value(kDefaultHardware),
                                    "hardware preset or path (e.g. 2xa100-80gb-sxm)")(
      "alpha", po::value<std::string>()->default_value("0.8"), "per-token acceptance rate, [0, 1)")(
      "batch", po::value<std::string>()->default_value("1-256:x2"),
      "batch sizes: 1,2,4 or 1-8 or 1-256:x2")(
      "gamma", po::value<std::string>()->default_value("1-8"), "draft lengths")(
      "context", po::value<int64_t>()->default_value(1024),
      "tokens already in each sequence's KV cache")(
      "verify", po::value<std::string>()->default_value("gamma+1"),
      "positions the target verifies per sequence: gamma+1 or gamma");
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  AddPredictionRoutingOptions(options);
  po::variables_map values;
  if (!ParseOptions(
          "usage: moelab plan sd --model M --draft D --hardware H [--calibrate PROFILE.json] | "
          "--profile FIT.json [--alpha A] [--batch LIST] [--gamma LIST] [--json|--csv]",
          options, args, values)) {
    return 0;
  }
  plan::SdSweepRequest request;
  request.model = values["model"].as<std::string>();
  request.draft = values["draft"].as<std::string>();
  request.cost = CostSourceOptionsFrom(values);
  request.routing = PredictionRoutingFrom(values);
  request.routing_seed = PredictionRoutingSeedFrom(values);
  const double alpha = base::ParseNumber(values["alpha"].as<std::string>(), "alpha");
  if (!(alpha >= 0 && alpha < 1))
    throw base::Error("--alpha " + values["alpha"].as<std::string>() +
                      ": expected a number in [0, 1)");
  request.levels = {alpha};
  request.plan.batches = base::ParseIntList(values["batch"].as<std::string>(), "batch", 1);
  request.plan.gammas = base::ParseIntList(values["gamma"].as<std::string>(), "gamma", 1);
  request.plan.context_length = values["context"].as<int64_t>();
  request.plan.verify = model::VerifyPositionsFromString(values["verify"].as<std::string>());
  const OutputRequest output = OutputRequestFrom(values);
  const plan::SdSweepResult result = plan::RunSdSweep(request, model::PresetStore::Default());
  report::Emit(plan::RenderSdPlan(result, output.format), output.out);
  return 0;
}

int PlanHardware(const std::vector<std::string>& args) {
  po::options_description options("moelab plan hardware");
  options.add_options()("model", po::value<std::string>()->default_value("mixtral-8x7b"),
                        "model preset or path")("batch", po::value<int64_t>()->default_value(1),
                                                "sequences decoded together")(
      "prompt", po::value<int64_t>()->default_value(512), "prompt tokens per sequence (TTFT)")(
      "context", po::value<int64_t>()->default_value(1024),
      "KV cache tokens per sequence during decode (TPOT)")("tpot-max", po::value<std::string>(),
                                                           "TPOT target, seconds")(
      "ttft-max", po::value<std::string>(), "TTFT target, seconds")(
      "devices", po::value<std::string>()->default_value("1,2,4,8"),
      "accelerator counts to consider for every accelerator preset");
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  AddPredictionRoutingOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan hardware --model M [--tpot-max S] [--ttft-max S] [--batch "
                    "B] [--calibrate PROFILE.json] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  plan::HardwareSearchRequest request;
  request.model = values["model"].as<std::string>();
  request.batch = values["batch"].as<int64_t>();
  request.prompt = values["prompt"].as<int64_t>();
  request.context = values["context"].as<int64_t>();
  if (values.count("tpot-max"))
    request.tpot_max_s = base::ParseNumber(values["tpot-max"].as<std::string>(), "tpot-max");
  if (values.count("ttft-max"))
    request.ttft_max_s = base::ParseNumber(values["ttft-max"].as<std::string>(), "ttft-max");
  request.device_counts = base::ParseIntList(values["devices"].as<std::string>(), "devices", 1);
  request.cost = CostSourceOptionsFrom(values);
  request.routing = PredictionRoutingFrom(values);
  request.routing_seed = PredictionRoutingSeedFrom(values);
  const OutputRequest output = OutputRequestFrom(values);
  report::Emit(
      plan::Render(plan::SearchHardware(request, model::PresetStore::Default()), output.format),
      output.out);
  return 0;
}

}  // namespace

void RegisterPlanCommands(std::vector<Command>& commands) {
  commands.push_back(
      {{"plan", "sd"}, "speculative-decoding speedup per batch and gamma (analytic)", PlanSd});
  commands.push_back({{"plan", "hardware"},
                      "the smallest listed hardware that meets a TPOT/TTFT target",
                      PlanHardware});
}

}  // namespace moelab::cli
