// moelab sim sd: the speculative-decoding sweep over batch x gamma x alpha (or sigma).
#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/reports.h"
#include "plan/sd_sweep.h"

namespace moelab::cli {
namespace {

int SimSd(const std::vector<std::string>& args) {
  po::options_description options("moelab sim sd");
  options.add_options()("model", po::value<std::string>()->default_value("qwen2-57b-a14b"),
                        "target model preset or path")(
      "draft", po::value<std::string>()->default_value("qwen2-0.5b"), "draft model preset or path")(
      "hardware", po::value<std::string>()->default_value("2xa100-80gb-sxm"),
      "hardware preset or path (analytic roofline cost source)")(
      "alpha", po::value<std::string>()->default_value("0.6,0.7,0.8,0.9"),
      "acceptance rates: list (0.6,0.8) or start:stop:step, each in [0, 1)")(
      "sigma", po::value<std::string>(),
      "accepted-length fractions instead of alpha, each in (0, 1]")(
      "batch", po::value<std::string>()->default_value("1-256:x2"),
      "batch sizes: 1,2,4 or 1-8 or 1-256:x2")(
      "gamma", po::value<std::string>()->default_value("1-8"), "draft lengths")(
      "context", po::value<int64_t>()->default_value(1024),
      "tokens already in each sequence's KV cache")(
      "verify", po::value<std::string>()->default_value("gamma+1"),
      "positions the target verifies per sequence: gamma+1 or gamma")(
      "sd-fit", po::value<std::string>(),
      "a fitted MoESD model (moelab fit sd): its speedup is reported beside each row");
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  AddPredictionRoutingOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sim sd --model M --draft D --hardware H|--profile FIT.json "
                    "[--calibrate PROFILE.json] [--alpha LIST | --sigma LIST] [--batch LIST] "
                    "[--gamma LIST] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  plan::SdSweepRequest request;
  request.model = values["model"].as<std::string>();
  request.draft = values["draft"].as<std::string>();
  request.plan.batches = base::ParseIntList(values["batch"].as<std::string>(), "batch", 1);
  request.plan.gammas = base::ParseIntList(values["gamma"].as<std::string>(), "gamma", 1);
  request.plan.context_length = values["context"].as<int64_t>();
  request.plan.verify = model::VerifyPositionsFromString(values["verify"].as<std::string>());
  request.by_sigma = values.count("sigma") > 0;
  if (request.by_sigma && !values["alpha"].defaulted())
    throw base::Error("give --alpha or --sigma, not both");
  request.levels =
      base::ParseNumberList(values[request.by_sigma ? "sigma" : "alpha"].as<std::string>(),
                            request.by_sigma ? "sigma" : "alpha");
  if (values.count("sd-fit")) request.sd_fit = values["sd-fit"].as<std::string>();
  request.cost = CostSourceOptionsFrom(values);
  request.routing = PredictionRoutingFrom(values);
  request.routing_seed = PredictionRoutingSeedFrom(values);
  const OutputRequest output = OutputRequestFrom(values);
  report::Emit(
      plan::RenderSdSweep(plan::RunSdSweep(request, model::PresetStore::Default()), output.format),
      output.out);
  return 0;
}

}  // namespace

void RegisterSimSdCommands(std::vector<Command>& commands) {
  commands.push_back(
      {{"sim", "sd"}, "speculative-decoding sweep over batch x gamma x alpha", SimSd});
}

}  // namespace moelab::cli
