// moelab fit latency | sd | predict | calibrate: least-squares fits of measured performance (fit/).
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "base/message_text.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "fit/cost_calibration.h"
#include "fit/cost_source_options.h"
#include "fit/fit_json.h"
#include "fit/fit_report.h"
#include "fit/latency_profile.h"
#include "fit/predict.h"
#include "fit/sd_fit.h"
#include "model/preset_store.h"
#include "report/json_rows.h"

namespace moelab::cli {
namespace {

// The solver options every fit takes, bound to `fit` (its values are the defaults), and the
// outputs: --out (required), --json, --csv.
void AddFitOptions(po::options_description& options, fit::FitOptions& fit) {
  // clang-format off
  options.add_options()
      ("loss", Into(&fit.loss), "robust loss: none | huber | cauchy")
      ("loss-scale", NumberInto(&fit.loss_scale, "loss-scale"), "residual size where a robust loss starts to down-weight (relative error for latency, speedup for sd)")
      ("starts", Into(&fit.starts), "solver starts (start 0 is the centre; others drawn from --seed)")
      ("seed", Into(&fit.seed), "seed for the starts")
      ("max-iterations", Into(&fit.max_iterations), "iteration cap per solve")
      ("json", po::bool_switch(), "print the fit JSON instead of the table")
      ("csv", po::bool_switch(), "print the fit's CSV rows instead of the table")
      ("out", po::value<std::string>()->required(), "write the fit (moelab.fit/1) to this file, atomically");
  // clang-format on
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

}  // namespace

int FitLatencyCommand(const std::vector<std::string>& args) {
  fit::FitOptions fit_options;
  std::string profile;
  po::options_description options("moelab fit latency");
  options.add_options()("profile", po::value<std::string>(&profile)->required(),
                        "profile file (moelab.profile/1)");
  AddFitOptions(options, fit_options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit latency --profile PROFILE.json --out FIT.json [--loss "
                    "none|huber|cauchy] [--starts N] [--seed S] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  fit_options.Validate();
  const fit::LatencyFit fit = fit::FitLatency(fit::LoadProfile(profile), fit_options);
  Emit(fit::LatencyFitToJson(fit), values, CurveRows,
       fit::LatencyFitText(fit, values["out"].as<std::string>()));
  return 0;
}

int FitSdCommand(const std::vector<std::string>& args) {
  fit::SdFitRequest request;
  po::options_description options("moelab fit sd");
  // clang-format off
  options.add_options()
      ("measurements", po::value(&request.measurement_files)->required(), "measured speedups: CSV (batch,gamma,K,E,sigma,speedup), a JSON array, or `moelab run --workload sd` reports; repeat to combine files")
      ("model", po::value(&request.model)->required(), "target model preset or path (bounds bias and k2)")
      ("draft", po::value(&request.draft)->required(), "draft model preset or path (bounds draft_bias)")
      ("hardware", po::value(&request.hardware)->required(), "hardware preset or path the measurements ran on")
      ("denominator", ParsedInto(&request.denominator, "algorithm1", model::SdDenominatorFromString), "algorithm1 (the paper's Algorithm 1) | equation4")
      ("max-reject-s", NumberInto(&request.max_reject_s, "max-reject-s"), "upper bound T_rej of reject_bias and reject_k, seconds (default: derived from the hardware, fit/README.md)");
  // clang-format on
  AddFitOptions(options, request.options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit sd --measurements FILE.csv --model M --draft D --hardware H "
                    "--out FIT.json [--denominator algorithm1|equation4] [--loss "
                    "none|huber|cauchy] [--starts N] [--seed S] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  request.options.Validate();
  const auto [fit, origin] = fit::RunSdFit(request, model::PresetStore::Default());
  nlohmann::json json = fit::SdFitToJson(fit);
  json["measurements"] = request.measurement_files;
  Emit(json, values, SdFitRow, fit::SdFitText(fit, origin, values["out"].as<std::string>()));
  return 0;
}

// The JSON carries the provenance; the CSV row does not (as plan sd's and sim sd's rows, so a
// sweep's rows are the same bytes on any rank and at any time).
std::optional<Printed> FitPredictPrinted(const std::vector<std::string>& args) {
  std::string path;
  model::SdPoint point;
  po::options_description options("moelab fit predict");
  // clang-format off
  options.add_options()
      ("fit", po::value(&path)->required(), "an sd fit written by `moelab fit sd`")
      ("batch", po::value(&point.batch)->required(), "batch size B")
      ("gamma", po::value(&point.gamma)->required(), "draft tokens per round")
      ("K", po::value(&point.top_k)->required(), "experts per token (top-k)")
      ("E", po::value(&point.num_experts)->required(), "routed experts per layer")
      ("sigma", po::value<std::string>()->required()->notifier([&point](const std::string& text) { point.sigma = base::ParseNumber(text, "sigma"); }), "accepted fraction of gamma + 1 tokens, (0, 1]");
  // clang-format on
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit predict --fit FIT.json --batch B --gamma G --K K --E E "
                    "--sigma S [--json|--csv]",
                    options, args, values)) {
    return std::nullopt;
  }
  const OutputRequest output = OutputRequestFrom(values);
  nlohmann::json json = fit::SpeedupPredictionJson(path, fit::LoadSdFit(path), point);
  std::ostringstream speedup;
  speedup << std::setprecision(6) << json["speedup"].get<double>() << "\n";
  const report::RowSet rows =
      output.format == Format::kCsv ? report::JsonRow(json) : report::RowSet({});
  json["provenance"] = Provenance();
  return Printed{PrintedResult(output, json, speedup.str(), rows), output.out, {}};
}

int FitPredictCommand(const std::vector<std::string>& args) {
  return EmitPrinted(FitPredictPrinted(args));
}

// The calibration the --calibrate option of plan/sim computes on the fly, shown on its own.
int FitCalibrateCommand(const std::vector<std::string>& args) {
  std::string profile, device = "cpu";
  std::optional<std::string> hardware;
  model::CostParameters assumed;
  po::options_description options("moelab fit calibrate");
  // clang-format off
  options.add_options()
      ("profile", po::value(&profile)->required(), "profile file (moelab.profile/1)")
      ("hardware", ParsedIntoOptional(&hardware, [](const std::string& name) { return name; }), "hardware preset or file the profile was measured on (default: the limits the profile measured)")
      ("device", Into(&device), "which samples: cpu | gpu")
      ("dtype", Into(&assumed.compute_dtype), "data type whose peak FLOP/s is the roofline's");
  // clang-format on
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit calibrate --profile PROFILE.json [--hardware H] [--device "
                    "cpu|gpu] [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  if (device != "cpu" && device != "gpu")
    throw base::Error("--device must be cpu or gpu, got '" + base::EscapeForMessage(device) + "'");
  const fit::Profile measured = fit::LoadProfile(profile);
  std::optional<model::HardwareSpec> spec;
  if (hardware) spec = model::PresetStore::Default().LoadHardware(*hardware);
  const fit::CostCalibration calibration =
      fit::CostSources::CalibrateOn(measured, spec, device, assumed);
  nlohmann::json json = calibration.ToJson();
  json["schema"] = "moelab.cost_calibration/1";
  json["provenance"] = Provenance();
  EmitResult(output, json, fit::CalibrationText(calibration));
  return 0;
}

}  // namespace moelab::cli
