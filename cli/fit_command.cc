// moelab fit latency | sd | predict: least-squares fits of measured performance (fit/).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "fit/cost_calibration.h"
#include "fit/fit_json.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "fit/predict.h"
#include "fit/sd_fit.h"
#include "fit/sd_measurements.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "model/preset_store.h"

namespace moelab::cli {
namespace {

// Four significant digits, general notation: parameters span 1e-9 s to 2.
std::string Sig(double value) {
  std::ostringstream out;
  out << std::setprecision(4) << value;
  return out.str();
}

std::string Sig(const std::optional<double>& value) { return value ? Sig(*value) : "-"; }

void AddFitOptions(po::options_description& options) {
  const FitOptions defaults;
  options.add_options()
      ("loss", po::value<std::string>()->default_value(defaults.loss), "robust loss: none | huber | cauchy")
      ("loss-scale", po::value<std::string>()->default_value(Sig(defaults.loss_scale)), "residual size where a robust loss starts to down-weight (relative error for latency, speedup for sd)")
      ("starts", po::value<int>()->default_value(defaults.starts), "solver starts (start 0 is the centre; others drawn from --seed)")
      ("seed", po::value<uint64_t>()->default_value(defaults.seed), "seed for the starts")
      ("max-iterations", po::value<int>()->default_value(defaults.max_iterations), "iteration cap per solve")
      ("json", po::bool_switch(), "print the fit JSON instead of the table")
      ("out", po::value<std::string>()->required(), "write the fit (moelab.fit/1) to this file, atomically");
}

FitOptions FitOptionsFrom(const po::variables_map& values) {
  FitOptions options;
  options.loss = values["loss"].as<std::string>();
  options.loss_scale = ParseNumber(values["loss-scale"].as<std::string>(), "loss-scale");
  options.starts = values["starts"].as<int>();
  options.seed = values["seed"].as<uint64_t>();
  options.max_iterations = values["max-iterations"].as<int>();
  options.Validate();
  return options;
}

// Writes --out, and prints the JSON too with --json; the table is printed by the caller otherwise.
bool Emit(nlohmann::json json, const po::variables_map& values) {
  json["provenance"] = Provenance();
  const std::string out = values["out"].as<std::string>();
  EmitJson(json, out);
  if (values["json"].as<bool>()) {
    EmitJson(json, "");
    return true;
  }
  return false;
}

std::string ParamsCell(const LatencyFormFit& fit) {
  const std::vector<std::string>& names = LatencyFormParameterNames(fit.form);
  std::string cell;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!cell.empty()) cell += "  ";
    cell += names[i] + "=" + Sig(fit.params[i]);
    if (fit.std_errors[i]) cell += "+-" + Sig(*fit.std_errors[i]);
  }
  return cell;
}

void PrintLatencyFit(const LatencyFit& fit, const std::string& out) {
  std::cout << "Latency fit of " << fit.profile << ": " << fit.operators.size() << " operator curve(s), "
            << fit.skipped.size() << " group(s) skipped; best of " << fit.options.starts
            << " starts, loss " << fit.options.loss << "\n\n";
  Table table({"operator", "device", "shape", "x", "n", "form", "parameters (+- std error)", "rmse s",
               "mape %", "R2", "CV rmse s", "best"});
  for (const OperatorCurve& curve : fit.operators) {
    for (const LatencyFormFit& form : curve.forms) {
      table.AddRow({curve.op, curve.device, curve.shape.dump(), curve.variable, std::to_string(curve.n),
                    ToString(form.form), ParamsCell(form), Sig(form.rmse_s),
                    FormatNumber(form.mape, 2), form.r2 ? FormatNumber(*form.r2, 4) : "-",
                    Sig(form.loo_rmse_s),
                    form.form == curve.best ? "*" : ""});
    }
  }
  std::cout << table.Render();
  for (const OperatorCurve& curve : fit.operators) {
    for (const std::string& note : curve.notes) std::cout << "note: " << curve.op << " " << curve.shape.dump() << ": " << note << "\n";
  }
  for (const SkippedGroup& group : fit.skipped) {
    std::cout << "skipped: " << group.op << " on " << group.device << " " << group.shape.dump() << ": "
              << group.reason << "\n";
  }
  std::cout << "\nunits: seconds, tokens (bytes where x = bytes); CV = leave-one-out (n <= 60) or 5-fold;\n"
            << "* = lowest CV rmse; no +- where the std errors are undetermined (see the JSON's covariance)\n"
            << "wrote " << out << "\n";
}

int FitLatencyCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit latency");
  options.add_options()
      ("profile", po::value<std::string>()->required(), "profile file (moelab.profile/1)");
  AddFitOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit latency --profile PROFILE.json --out FIT.json [--loss none|huber|cauchy] "
                    "[--starts N] [--seed S] [--json]",
                    options, args, values)) {
    return 0;
  }
  const FitOptions fit_options = FitOptionsFrom(values);
  const LatencyFit fit = FitLatency(LoadProfile(values["profile"].as<std::string>()), fit_options);
  if (!Emit(LatencyFitToJson(fit), values)) PrintLatencyFit(fit, values["out"].as<std::string>());
  return 0;
}

void PrintSdFit(const SdFit& fit, const std::string& origin, const std::string& out) {
  const SdFitScales& s = fit.scales;
  std::cout << "MoESD speedup fit: target " << s.model << ", draft " << s.draft << ", on " << s.hardware
            << "\n" << fit.n << " measurements (" << origin << "), denominator " << ToString(fit.denominator)
            << ", ridge point " << FormatNumber(s.ridge_point_tokens, 1) << " tokens\n"
            << "best of " << fit.options.starts << " starts (" << fit.starts_converged << " converged), seed "
            << fit.options.seed << ", loss " << fit.options.loss << ", final cost " << Sig(fit.final_cost)
            << "\n\n";
  Table table({"parameter", "value", "std error", "lower", "upper", "note"});
  for (size_t i = 0; i < MoesdParams::kNames.size(); ++i) {
    const std::string name = MoesdParams::kNames[i];
    std::string note;
    if (std::find(fit.gauge_fixed.begin(), fit.gauge_fixed.end(), name) != fit.gauge_fixed.end()) note = "gauge";
    if (std::find(fit.at_bound.begin(), fit.at_bound.end(), name) != fit.at_bound.end()) {
      note += note.empty() ? "at bound" : ", at bound";
    }
    table.AddRow({name, Sig(fit.params.values[i]), Sig(fit.std_errors[i]), Sig(fit.bounds.lower[i]),
                  std::isfinite(fit.bounds.upper[i]) ? Sig(fit.bounds.upper[i]) : "inf", note});
  }
  std::cout << table.Render() << "\n";
  Table metrics({"metric", "value"});
  metrics.AddRow({"rmse (speedup)", Sig(fit.rmse)});
  metrics.AddRow({"mape (%)", FormatNumber(fit.mape, 2)});
  metrics.AddRow({"R2", fit.r2 ? FormatNumber(*fit.r2, 4) : "-"});
  metrics.AddRow({fit.n <= 60 ? "leave-one-out rmse" : "5-fold CV rmse", Sig(fit.loo_rmse)});
  std::cout << metrics.Render() << "\n"
            << "time parameters in seconds; lambda x ridge point = transition point P; s = growth per token\n"
            << "std errors: " << fit.covariance_status << ": " << fit.covariance_note << "\n"
            << "gauge: the speedup is unchanged when all eight time parameters scale together"
            << (fit.gauge_fixed.size() > 1 ? ", and only draft_bias + reject_bias is determined" : "")
            << "; gauge parameters are set by the bounds, not the data (fit/README.md)\n"
            << "wrote " << out << "\n";
}

int FitSdCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit sd");
  options.add_options()
      ("measurements", po::value<std::vector<std::string>>()->required(), "measured speedups: CSV (batch,gamma,K,E,sigma,speedup), a JSON array, or `moelab run --workload sd` reports; repeat to combine files")
      ("model", po::value<std::string>()->required(), "target model preset or path (bounds bias and k2)")
      ("draft", po::value<std::string>()->required(), "draft model preset or path (bounds draft_bias)")
      ("hardware", po::value<std::string>()->required(), "hardware preset or path the measurements ran on")
      ("denominator", po::value<std::string>()->default_value("algorithm1"), "algorithm1 (the paper's Algorithm 1) | equation4")
      ("max-reject-s", po::value<std::string>(), "upper bound T_rej of reject_bias and reject_k, seconds (default: derived from the hardware, fit/README.md)");
  AddFitOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit sd --measurements FILE.csv --model M --draft D --hardware H --out FIT.json "
                    "[--denominator algorithm1|equation4] [--loss none|huber|cauchy] [--starts N] [--seed S] [--json]",
                    options, args, values)) {
    return 0;
  }
  const FitOptions fit_options = FitOptionsFrom(values);
  const SdDenominator denominator = SdDenominatorFromString(values["denominator"].as<std::string>());
  std::optional<double> max_reject_s;
  if (values.count("max-reject-s")) max_reject_s = ParseNumber(values["max-reject-s"].as<std::string>(), "max-reject-s");

  std::vector<SdMeasurement> measurements;
  std::string origin;
  for (const std::string& file : values["measurements"].as<std::vector<std::string>>()) {
    const std::vector<SdMeasurement> loaded = LoadSdMeasurements(file);
    measurements.insert(measurements.end(), loaded.begin(), loaded.end());
    origin += (origin.empty() ? "" : " + ") + file;
  }
  const PresetStore store = PresetStore::Default();
  const MoeModelSpec target = store.LoadModel(values["model"].as<std::string>());
  const MoeModelSpec draft = store.LoadModel(values["draft"].as<std::string>());
  const HardwareSpec hardware = store.LoadHardware(values["hardware"].as<std::string>());
  ValidateSdMeasurementSet(measurements, origin);
  const SdFitScales scales = ComputeSdFitScales(target, draft, hardware, measurements, max_reject_s);
  const SdFit fit = FitSd(measurements, scales, denominator, fit_options, origin);

  nlohmann::json json = SdFitToJson(fit);
  json["measurements"] = values["measurements"].as<std::vector<std::string>>();
  if (!Emit(json, values)) PrintSdFit(fit, origin, values["out"].as<std::string>());
  return 0;
}

int FitPredictCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit predict");
  options.add_options()
      ("fit", po::value<std::string>()->required(), "an sd fit written by `moelab fit sd`")
      ("batch", po::value<int64_t>()->required(), "batch size B")
      ("gamma", po::value<int64_t>()->required(), "draft tokens per round")
      ("K", po::value<int64_t>()->required(), "experts per token (top-k)")
      ("E", po::value<int64_t>()->required(), "routed experts per layer")
      ("sigma", po::value<std::string>()->required(), "accepted fraction of gamma + 1 tokens, (0, 1]")
      ("json", po::bool_switch(), "print a JSON object");
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit predict --fit FIT.json --batch B --gamma G --K K --E E --sigma S [--json]",
                    options, args, values)) {
    return 0;
  }
  const std::string path = values["fit"].as<std::string>();
  if (!std::filesystem::exists(path)) throw Error(path + ": fit file not found");
  const nlohmann::json document = JsonReader::ParseFile(path);
  if (FitKind(document, path) != "sd") {
    throw Error(path + ": a latency fit; `moelab fit predict` takes an sd fit (written by `moelab fit sd`)");
  }
  const SdFit fit = SdFitFromJson(document, path);
  const SdPoint point{values["batch"].as<int64_t>(), values["gamma"].as<int64_t>(), values["K"].as<int64_t>(),
                      values["E"].as<int64_t>(), ParseNumber(values["sigma"].as<std::string>(), "sigma")};
  const double speedup = PredictSpeedup(fit, point);
  if (values["json"].as<bool>()) {
    EmitJson({{"schema", "moelab.fit_predict/1"},
              {"fit", path},
              {"batch", point.batch},
              {"gamma", point.gamma},
              {"K", point.top_k},
              {"E", point.num_experts},
              {"sigma", point.sigma},
              {"denominator", ToString(fit.denominator)},
              {"speedup", speedup},
              {"provenance", Provenance()}},
             "");
  } else {
    std::cout << std::setprecision(6) << speedup << "\n";
  }
  return 0;
}

}  // namespace

// The calibration the --calibrate option of plan/sim computes on the fly, shown on its own.
int FitCalibrateCommand(const std::vector<std::string>& args) {
  po::options_description options("moelab fit calibrate");
  options.add_options()
      ("profile", po::value<std::string>()->required(), "profile file (moelab.profile/1)")
      ("hardware", po::value<std::string>(), "hardware preset or file the profile was measured on (default: the limits the profile measured)")
      ("device", po::value<std::string>()->default_value("cpu"), "which samples: cpu | gpu")
      ("dtype", po::value<std::string>()->default_value("bf16"), "data type whose peak FLOP/s is the roofline's")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON (moelab.cost_calibration/1) to this file, atomically");
  po::variables_map values;
  if (!ParseOptions("usage: moelab fit calibrate --profile PROFILE.json [--hardware H] [--device cpu|gpu] [--json]",
                    options, args, values)) {
    return 0;
  }
  const Profile profile = LoadProfile(values["profile"].as<std::string>());
  const std::string device = values["device"].as<std::string>();
  const std::string dtype = values["dtype"].as<std::string>();
  RooflineDevice roofline;
  if (values.count("hardware")) {
    roofline = RooflineFromHardware(PresetStore::Default().LoadHardware(values["hardware"].as<std::string>()), device,
                                    dtype, ProfiledThreads(profile));
  } else if (device == "cpu") {
    roofline = RooflineFromLimits(profile, dtype);
  } else {
    throw Error("--device gpu needs --hardware: the profile measures no GPU limits");
  }
  CostParameters assumed;
  assumed.compute_dtype = dtype;
  const CostCalibration calibration = CalibrateCosts(profile, roofline, assumed, FitOptions{});
  const std::string out = values["out"].as<std::string>();
  if (values["json"].as<bool>() || !out.empty()) {
    nlohmann::json json = calibration.ToJson();
    json["schema"] = "moelab.cost_calibration/1";
    json["provenance"] = Provenance();
    EmitJson(json, out);
    return 0;
  }
  std::cout << "Roofline calibration of " << profile.origin << " (" << device << " samples) against "
            << roofline.source << ": peak " << Sig(roofline.peak_flops) << " FLOP/s, bandwidth "
            << Sig(roofline.bandwidth_bytes_per_s) << " B/s\n\n";
  Table parameters({"parameter", "value", "std error", "note"});
  const char* names[] = {"compute_efficiency", "memory_efficiency", "kernel_launch_s"};
  const double fitted[] = {calibration.params.compute_efficiency, calibration.params.memory_efficiency,
                           calibration.params.kernel_launch_s};
  for (size_t i = 0; i < 3; ++i) {
    const bool has_error = i < calibration.std_errors.size() && calibration.std_errors[i];
    parameters.AddRow({names[i], Sig(fitted[i]), has_error ? Sig(*calibration.std_errors[i]) : "-",
                       i < calibration.at_bound.size() && calibration.at_bound[i] ? "at bound" : ""});
  }
  Table operators({"operator", "points", "MAPE assumed %", "MAPE calibrated %"});
  for (const CalibratedOperator& op : calibration.operators) {
    operators.AddRow({op.op, std::to_string(op.points), FormatNumber(op.mape_assumed, 1), FormatNumber(op.mape_calibrated, 1)});
  }
  operators.AddRow({"all", std::to_string(calibration.points), FormatNumber(calibration.mape_assumed, 1),
                    FormatNumber(calibration.mape_calibrated, 1)});
  std::cout << parameters.Render() << "\n" << operators.Render();
  for (const std::string& note : calibration.notes) std::cout << "note: " << note << "\n";
  return 0;
}

void RegisterFitCommands(std::vector<Command>& commands) {
  commands.push_back({{"fit", "calibrate"}, "fit the analytic roofline's efficiencies to a profile (the calibrated-roofline cost source)", FitCalibrateCommand});
  commands.push_back({{"fit", "latency"}, "fit per-operator latency curves to a profile (roofline, linear, constant)", FitLatencyCommand});
  commands.push_back({{"fit", "sd"}, "fit the MoESD speedup model to measured SD speedups", FitSdCommand});
  commands.push_back({{"fit", "predict"}, "speedup predicted by an sd fit", FitPredictCommand});
}

}  // namespace moelab::cli
