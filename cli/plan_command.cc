// moelab plan sd and moelab plan hardware: parse, run the planner (plan/), print.
#include <optional>

#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/reused_options.h"
#include "cli/sd_options.h"
#include "model/preset_store.h"
#include "plan/hardware_search.h"
#include "plan/reports.h"

namespace moelab::cli {

namespace {

struct PlanSdState {
  plan::SdSweepRequest request;
  double alpha = 0.8;
};

void DeclarePlanSd(po::options_description& options, PlanSdState& state) {
  AddSdSweepOptions(options, state.request);
  options.add_options()("alpha", NumberInto(&state.alpha, "alpha"),
                        "per-token acceptance rate, [0, 1)");
  AddSdSweepSources(options, state.request);
}

std::optional<Printed> FinishPlanSd(const po::variables_map& values, PlanSdState& state) {
  plan::SdSweepRequest& request = state.request;
  request.cost = CostSourceOptionsFrom(values);
  if (!(state.alpha >= 0 && state.alpha < 1))
    throw base::Error("--alpha " + values["alpha"].as<std::string>() +
                      ": expected a number in [0, 1)");
  request.levels = {state.alpha};
  const OutputRequest output = OutputRequestFrom(values);
  const plan::SdSweepResult result = plan::RunSdSweep(request, model::PresetStore::Default());
  return Printed{plan::RenderSdPlan(result, output.format), output.out, {}};
}

}  // namespace

// The option table once per thread (ReusedOptions): a sweep calls this once per point.
std::optional<Printed> PlanSdPrinted(const std::vector<std::string>& args) {
  thread_local ReusedOptions<PlanSdState> command(
      "moelab plan sd",
      "usage: moelab plan sd --model M --draft D --hardware H [--calibrate PROFILE.json] | "
      "--profile FIT.json [--alpha A] [--batch LIST] [--gamma LIST] [--json|--csv]",
      DeclarePlanSd, FinishPlanSd);
  return command.Run(args);
}

int PlanSd(const std::vector<std::string>& args) { return EmitPrinted(PlanSdPrinted(args)); }

std::optional<Printed> PlanHardwarePrinted(const std::vector<std::string>& args) {
  plan::HardwareSearchRequest request;
  request.model = "mixtral-8x7b";
  const auto seconds = [](const char* name) {
    return [name](const std::string& text) { return base::ParseNumber(text, name); };
  };
  po::options_description options("moelab plan hardware");
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "model preset or path")
      ("batch", Into(&request.batch), "sequences decoded together")
      ("prompt", Into(&request.prompt), "prompt tokens per sequence (TTFT)")
      ("context", Into(&request.context), "KV cache tokens per sequence during decode (TPOT)")
      ("tpot-max", ParsedIntoOptional(&request.tpot_max_s, seconds("tpot-max")), "TPOT target, seconds")
      ("ttft-max", ParsedIntoOptional(&request.ttft_max_s, seconds("ttft-max")), "TTFT target, seconds")
      ("devices", ParsedInto(&request.device_counts, "1,2,4,8", [](const std::string& text) { return base::ParseIntList(text, "devices", 1); }), "accelerator counts to consider for every accelerator preset");
  // clang-format on
  AddOutputOptions(options);
  AddCostSourceOptions(options, ProfileRole::kRefused);
  AddPredictionRoutingOptions(options, request.routing, request.routing_seed);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan hardware --model M [--tpot-max S] [--ttft-max S] [--batch "
                    "B] [--calibrate PROFILE.json] [--json|--csv]",
                    options, args, values)) {
    return std::nullopt;
  }
  request.cost = CostSourceOptionsFrom(values);
  const OutputRequest output = OutputRequestFrom(values);
  return Printed{
      plan::Render(plan::SearchHardware(request, model::PresetStore::Default()), output.format),
      output.out,
      {}};
}

int PlanHardware(const std::vector<std::string>& args) {
  return EmitPrinted(PlanHardwarePrinted(args));
}

}  // namespace moelab::cli
