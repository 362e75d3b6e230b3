#include "fit/fit_report.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include "report/format.h"

namespace moelab::fit {
namespace {

using report::FormatNumber;
using report::Table;

// Four significant digits, general notation: parameters span 1e-9 s to 2.
std::string Sig(double value) {
  std::ostringstream out;
  out << std::setprecision(4) << value;
  return out.str();
}

std::string Sig(const std::optional<double>& value) { return value ? Sig(*value) : "-"; }

std::string ParamsCell(const LatencyFormFit& fit) {
  if (fit.form == LatencyForm::kInterpolated) {
    return std::to_string(fit.params.size() / 2) + " knots, x " + Sig(fit.params.front()) + ".." +
           Sig(fit.params[fit.params.size() - 2]);
  }
  const std::vector<std::string>& names = LatencyFormParameterNames(fit.form);
  std::string cell;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!cell.empty()) cell += "  ";
    cell += names[i] + "=" + Sig(fit.params[i]);
    if (fit.std_errors[i]) cell += "+-" + Sig(*fit.std_errors[i]);
  }
  return cell;
}

}  // namespace

std::string LatencyFitText(const LatencyFit& fit, const std::string& out) {
  std::ostringstream text;
  text << "Latency fit of " << fit.profile << ": " << fit.operators.size() << " operator curve(s), "
       << fit.skipped.size() << " group(s) skipped; best of " << fit.options.starts
       << " starts, loss " << fit.options.loss << "\n\n";
  Table table({"operator", "device", "shape", "x", "n", "form", "parameters (+- std error)",
               "rmse s", "mape %", "R2", "CV rmse s", "best"});
  for (const OperatorCurve& curve : fit.operators) {
    for (const LatencyFormFit& form : curve.forms) {
      table.AddRow({curve.op, curve.device, curve.shape.dump(), curve.variable,
                    std::to_string(curve.n), ToString(form.form), ParamsCell(form),
                    Sig(form.rmse_s), FormatNumber(form.mape, 2),
                    form.r2 ? FormatNumber(*form.r2, 4) : "-", Sig(form.loo_rmse_s),
                    form.form == curve.best ? "*" : ""});
    }
  }
  text << table.Render();
  for (const OperatorCurve& curve : fit.operators) {
    for (const std::string& note : curve.notes)
      text << "note: " << curve.op << " " << curve.shape.dump() << ": " << note << "\n";
  }
  for (const SkippedGroup& group : fit.skipped) {
    text << "skipped: " << group.op << " on " << group.device << " " << group.shape.dump() << ": "
         << group.reason << "\n";
  }
  text << "\nunits: seconds, tokens (bytes where x = bytes); CV = leave-one-out (n <= 60) or "
          "5-fold;\n"
       << "* = lowest CV rmse; no +- where the std errors are undetermined (see the JSON's "
          "covariance)\n"
       << "wrote " << out << "\n";
  return text.str();
}

std::string SdFitText(const SdFit& fit, const std::string& origin, const std::string& out) {
  const SdFitScales& s = fit.scales;
  std::ostringstream text;
  text << "MoESD speedup fit: target " << s.model << ", draft " << s.draft << ", on " << s.hardware
       << "\n"
       << fit.n << " measurements (" << origin << "), denominator " << ToString(fit.denominator)
       << ", ridge point " << FormatNumber(s.ridge_point_tokens, 1) << " tokens\n"
       << "best of " << fit.options.starts << " starts (" << fit.starts_converged
       << " converged), seed " << fit.options.seed << ", loss " << fit.options.loss
       << ", final cost " << Sig(fit.final_cost) << "\n\n";
  Table table({"parameter", "value", "std error", "lower", "upper", "note"});
  for (size_t i = 0; i < model::MoesdParams::kNames.size(); ++i) {
    const std::string name = model::MoesdParams::kNames[i];
    std::string note;
    if (std::find(fit.gauge_fixed.begin(), fit.gauge_fixed.end(), name) != fit.gauge_fixed.end())
      note = "gauge";
    if (std::find(fit.at_bound.begin(), fit.at_bound.end(), name) != fit.at_bound.end()) {
      note += note.empty() ? "at bound" : ", at bound";
    }
    table.AddRow({name, Sig(fit.params.values[i]), Sig(fit.std_errors[i]), Sig(fit.bounds.lower[i]),
                  std::isfinite(fit.bounds.upper[i]) ? Sig(fit.bounds.upper[i]) : "inf", note});
  }
  text << table.Render() << "\n";
  Table metrics({"metric", "value"});
  metrics.AddRow({"rmse (speedup)", Sig(fit.rmse)});
  metrics.AddRow({"mape (%)", FormatNumber(fit.mape, 2)});
  metrics.AddRow({"R2", fit.r2 ? FormatNumber(*fit.r2, 4) : "-"});
  metrics.AddRow({fit.n <= 60 ? "leave-one-out rmse" : "5-fold CV rmse", Sig(fit.loo_rmse)});
  text << metrics.Render() << "\n"
       << "time parameters in seconds; lambda x ridge point = transition point P; s = growth per "
          "token\n"
       << "std errors: " << fit.covariance_status << ": " << fit.covariance_note << "\n"
       << "gauge: the speedup is unchanged when all eight time parameters scale together"
       << (fit.gauge_fixed.size() > 1 ? ", and only draft_bias + reject_bias is determined" : "")
       << "; gauge parameters are set by the bounds, not the data (fit/README.md)\n"
       << "wrote " << out << "\n";
  return text.str();
}

std::string CalibrationText(const CostCalibration& calibration) {
  const RooflineDevice& roofline = calibration.roofline;
  std::ostringstream text;
  text << "Roofline calibration of " << calibration.profile << " (" << roofline.device
       << " samples) against " << roofline.source << ": peak " << Sig(roofline.peak_flops)
       << " FLOP/s, bandwidth " << Sig(roofline.bandwidth_bytes_per_s) << " B/s\n\n";
  Table parameters({"parameter", "value", "std error", "note"});
  const char* names[] = {"compute_efficiency", "memory_efficiency", "kernel_launch_s"};
  const double fitted[] = {calibration.params.compute_efficiency,
                           calibration.params.memory_efficiency,
                           calibration.params.kernel_launch_s};
  for (size_t i = 0; i < 3; ++i) {
    const bool has_error = i < calibration.std_errors.size() && calibration.std_errors[i];
    parameters.AddRow(
        {names[i], Sig(fitted[i]), has_error ? Sig(*calibration.std_errors[i]) : "-",
         i < calibration.at_bound.size() && calibration.at_bound[i] ? "at bound" : ""});
  }
  Table operators({"operator", "points", "MAPE assumed %", "MAPE calibrated %"});
  for (const CalibratedOperator& op : calibration.operators) {
    operators.AddRow({op.op, std::to_string(op.points), FormatNumber(op.mape_assumed, 1),
                      FormatNumber(op.mape_calibrated, 1)});
  }
  operators.AddRow({"all", std::to_string(calibration.points),
                    FormatNumber(calibration.mape_assumed, 1),
                    FormatNumber(calibration.mape_calibrated, 1)});
  text << parameters.Render() << "\n" << operators.Render();
  for (const std::string& note : calibration.notes) text << "note: " << note << "\n";
  return text.str();
}

}  // namespace moelab::fit
