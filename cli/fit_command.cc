// moelab fit latency | sd | predict | calibrate: least-squares fits of measured performance (fit/).
#include <iomanip>
#include <iostream>
#include <optional>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "fit/cost_calibration.h"
#include "fit/fit_json.h"
#include "fit/fit_report.h"
#include "fit/latency_profile.h"
#include "fit/predict.h"
#include "fit/sd_fit.h"
#include "model/preset_store.h"

namespace moelab::cli {
namespace {

void AddFitOptions(po::options_description& options) {
  const fit::FitOptions defaults;
  options.add_options()("loss", po::value<std::string>()->default_value(defaults.loss),
                        "robust loss: none | huber | cauchy")(
      "loss-scale", po::value<std::string>()->default_value(FormatNumber(defaults.loss_scale, 2)),
      "residual size where a robust loss starts to down-weight (relative error for latency, "
      "speedup for sd)")("starts", po::value<int>()->default_value(defaults.starts),
                         "solver starts (start 0 is the centre; others drawn from --seed)")(
      "seed", po::value<uint64_t>()->default_value(defaults.seed), "seed for the starts")(
      "max-iterations", po::value<int>()->default_value(defaults.max_iterations),
      "iteration cap per solve")("json", po::bool_switch(),
                                 "print the fit JSON instead of the table")(
      "csv", po::bool_switch(), "print the fit's CSV rows instead of the table")(
      "out", po::value<std::string>()->required(),
      "write the fit (moelab.fit/1) to this file, atomically");
}

fit::FitOptions FitOptionsFrom(const po::variables_map& values) {
  fit::FitOptions options;
  options.loss = values["loss"].as<std::string>();
  options.loss_scale = base::ParseNumber(values["loss-scale"].as<std::string>(), "loss-scale");
  options.starts = values["starts"].as<int>();
  options.seed = values["seed"].as<uint64_t>();
  options.max_iterations = values["max-iterations"].as<int>();
  options.Validate();
  return options;
}

// Writes --out, then prints the JSON (--json), its CSV rows (--csv) or the text.
void Emit(nlohmann::json json, const po::variables_map& values,
          report::RowSet (*rows)(const nlohmann::json&), const std::string& text) {
  json["provenance"] = Provenance();
  const OutputRequest output =
      OutputRequestFrom(values);  // --json with --csv refused before writing
  EmitJson(json, values["out"].as<std::string>());
  if (values["json"].as<bool>()) {
    EmitJson(json, "");
  } else {
    std::cout << (output.format == Format::kCsv ? rows(json).ToCsv() : text);
  }
}

report::RowSet SdFitRow(const nlohmann::json& json) { return report::JsonRow(json); }
// One row per operator curve, every form's parameters and metrics as columns.
report::RowSet CurveRows(const nlohmann::json& json) {
  return report::JsonArrayRows(json["operators"]);
}

int FitLatencyCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit latency");
  options.add_options()("profile", po::value<std::string>()->required(),
                        "profile file (moelab.profile/1)");
  AddFitOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit latency --profile PROFILE.json --out FIT.json [--loss "
                    "none|huber|cauchy] "
                    "[--starts N] [--seed S] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const fit::FitOptions fit_options = FitOptionsFrom(values);
  const fit::LatencyFit fit =
      fit::FitLatency(fit::LoadProfile(values["profile"].as<std::string>()), fit_options);
  Emit(fit::LatencyFitToJson(fit), values, CurveRows,
       fit::LatencyFitText(fit, values["out"].as<std::string>()));
  return 0;
}

int FitSdCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit sd");
  options.add_options()("measurements", po::value<std::vector<std::string>>()->required(),
                        "measured speedups: CSV (batch,gamma,K,E,sigma,speedup), a JSON array, or "
                        "`moelab run --workload sd` reports; repeat to combine files")(
      "model", po::value<std::string>()->required(),
      "target model preset or path (bounds bias and k2)")(
      "draft", po::value<std::string>()->required(),
      "draft model preset or path (bounds draft_bias)")(
      "hardware", po::value<std::string>()->required(),
      "hardware preset or path the measurements ran on")(
      "denominator", po::value<std::string>()->default_value("algorithm1"),
      "algorithm1 (the paper's Algorithm 1) | equation4")(
      "max-reject-s", po::value<std::string>(),
      "upper bound T_rej of reject_bias and reject_k, seconds (default: derived from the hardware, "
      "fit/README.md)");
  AddFitOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit sd --measurements FILE.csv --model M --draft D --hardware H "
                    "--out FIT.json "
                    "[--denominator algorithm1|equation4] [--loss none|huber|cauchy] [--starts N] "
                    "[--seed S] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  fit::SdFitRequest request;
  request.options = FitOptionsFrom(values);
  request.denominator = model::SdDenominatorFromString(values["denominator"].as<std::string>());
  if (values.count("max-reject-s"))
    request.max_reject_s =
        base::ParseNumber(values["max-reject-s"].as<std::string>(), "max-reject-s");
  request.measurement_files = values["measurements"].as<std::vector<std::string>>();
  request.model = values["model"].as<std::string>();
  request.draft = values["draft"].as<std::string>();
  request.hardware = values["hardware"].as<std::string>();
  const auto [fit, origin] = fit::RunSdFit(request, model::PresetStore::Default());
  nlohmann::json json = fit::SdFitToJson(fit);
  json["measurements"] = values["measurements"].as<std::vector<std::string>>();
  Emit(json, values, SdFitRow, fit::SdFitText(fit, origin, values["out"].as<std::string>()));
  return 0;
}

int FitPredictCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit predict");
  options.add_options()("fit", po::value<std::string>()->required(),
                        "an sd fit written by `moelab fit sd`")(
      "batch", po::value<int64_t>()->required(), "batch size B")(
      "gamma", po::value<int64_t>()->required(), "draft tokens per round")(
      "K", po::value<int64_t>()->required(), "experts per token (top-k)")(
      "E", po::value<int64_t>()->required(), "routed experts per layer")(
      "sigma", po::value<std::string>()->required(),
      "accepted fraction of gamma + 1 tokens, (0, 1]");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit predict --fit FIT.json --batch B --gamma G --K K --E E "
                    "--sigma S [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  const std::string path = values["fit"].as<std::string>();
  const fit::SdFit fit = fit::LoadSdFit(path);
  const model::SdPoint point{values["batch"].as<int64_t>(), values["gamma"].as<int64_t>(),
                             values["K"].as<int64_t>(), values["E"].as<int64_t>(),
                             base::ParseNumber(values["sigma"].as<std::string>(), "sigma")};
  const double speedup = fit::PredictSpeedup(fit, point);
  if (output.format != Format::kTable) {
    EmitJsonOrCsv(output, {{"schema", "moelab.fit_predict/1"},
                           {"fit", path},
                           {"batch", point.batch},
                           {"gamma", point.gamma},
                           {"K", point.top_k},
                           {"E", point.num_experts},
                           {"sigma", point.sigma},
                           {"denominator", ToString(fit.denominator)},
                           {"speedup", speedup},
                           {"provenance", Provenance()}});
  } else {
    std::cout << std::setprecision(6) << speedup << "\n";
  }
  return 0;
}

}  // namespace

// The calibration the --calibrate option of plan/sim computes on the fly, shown on its own.
int FitCalibrateCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit calibrate");
  options.add_options()("profile", po::value<std::string>()->required(),
                        "profile file (moelab.profile/1)")(
      "hardware", po::value<std::string>(),
      "hardware preset or file the profile was measured on (default: the limits the profile "
      "measured)")("device", po::value<std::string>()->default_value("cpu"),
                   "which samples: cpu | gpu")("dtype",
                                               po::value<std::string>()->default_value("bf16"),
                                               "data type whose peak FLOP/s is the roofline's");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit calibrate --profile PROFILE.json [--hardware H] [--device "
                    "cpu|gpu] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  const fit::Profile profile = fit::LoadProfile(values["profile"].as<std::string>());
  std::optional<model::HardwareSpec> hardware;
  if (values.count("hardware"))
    hardware = model::PresetStore::Default().LoadHardware(values["hardware"].as<std::string>());
  model::CostParameters assumed;
  assumed.compute_dtype = values["dtype"].as<std::string>();
  const fit::RooflineDevice roofline = fit::ProfiledRoofline(
      profile, hardware, values["device"].as<std::string>(), assumed.compute_dtype);
  const fit::CostCalibration calibration =
      fit::CalibrateCosts(profile, roofline, assumed, fit::FitOptions{});
  if (output.format == Format::kTable) {
    std::cout << fit::CalibrationText(calibration);
    return 0;
  }
  nlohmann::json json = calibration.ToJson();
  json["schema"] = "moelab.cost_calibration/1";
  json["provenance"] = Provenance();
  EmitJsonOrCsv(output, json);
  return 0;
}

void RegisterFitCommands(std::vector<Command>& commands) {
  commands.push_back({{"fit", "calibrate"},
                      "fit the analytic roofline's efficiencies to a profile (the "
                      "calibrated-roofline cost source)",
                      FitCalibrateCommand});
  commands.push_back({{"fit", "latency"},
                      "fit per-operator latency curves to a profile (roofline, linear, constant)",
                      FitLatencyCommand});
  commands.push_back(
      {{"fit", "sd"}, "fit the MoESD speedup model to measured SD speedups", FitSdCommand});
  commands.push_back({{"fit", "predict"}, "speedup predicted by an sd fit", FitPredictCommand});
}

}  // namespace moelab::cli
