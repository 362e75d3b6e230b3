// moelab sim sd: the speculative-decoding sweep over batch x gamma x alpha (or sigma).
#include <optional>

#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/reused_options.h"
#include "cli/sd_options.h"
#include "model/preset_store.h"
#include "plan/reports.h"

namespace moelab::cli {

namespace {

void DeclareSimSd(po::options_description& options, plan::SdSweepRequest& request) {
  AddSdSweepOptions(options, request);
  // clang-format off
  options.add_options()
      ("alpha", po::value<std::string>()->default_value("0.6,0.7,0.8,0.9"), "acceptance rates: list (0.6,0.8) or start:stop:step, each in [0, 1)")
      ("sigma", po::value<std::string>(), "accepted-length fractions instead of alpha, each in (0, 1]")
      ("sd-fit", ParsedIntoOptional(&request.sd_fit, [](const std::string& path) { return path; }), "a fitted MoESD model (moelab fit sd): its speedup is reported beside each row");
  // clang-format on
  AddSdSweepSources(options, request);
}

std::optional<Printed> FinishSimSd(const po::variables_map& values, plan::SdSweepRequest& request) {
  request.by_sigma = values.count("sigma") > 0;
  if (request.by_sigma && !values["alpha"].defaulted())
    throw base::Error("give --alpha or --sigma, not both");
  const char* level = request.by_sigma ? "sigma" : "alpha";
  request.levels = base::ParseNumberList(values[level].as<std::string>(), level);
  request.cost = CostSourceOptionsFrom(values);
  const OutputRequest output = OutputRequestFrom(values);
  return Printed{
      plan::RenderSdSweep(plan::RunSdSweep(request, model::PresetStore::Default()), output.format),
      output.out,
      {}};
}

}  // namespace

// The option table once per thread (ReusedOptions): a sweep calls this once per point.
std::optional<Printed> SimSdPrinted(const std::vector<std::string>& args) {
  thread_local ReusedOptions<plan::SdSweepRequest> command(
      "moelab sim sd",
      "usage: moelab sim sd --model M --draft D --hardware H|--profile FIT.json "
      "[--calibrate PROFILE.json] [--alpha LIST | --sigma LIST] [--batch LIST] "
      "[--gamma LIST] [--json|--csv]",
      DeclareSimSd, FinishSimSd);
  return command.Run(args);
}

int SimSd(const std::vector<std::string>& args) { return EmitPrinted(SimSdPrinted(args)); }

}  // namespace moelab::cli
