#include "fit/cost_calibration.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "fit/least_squares.h"
#include "fit/metrics.h"
#include "base/error.h"
#include "model/roofline.h"
#include "report/format.h"

namespace moelab::fit {
namespace {

constexpr int kMinimumPoints = 4;

// One operator call's roofline time; params = {compute_efficiency, memory_efficiency,
// kernel_launch_s}.
struct RooflineCallRow {
  double compute_s_at_peak = 0;  // flops / peak
  double memory_s_at_peak = 0;   // bytes / bandwidth

  template <typename T>
  T operator()(const T* params) const {
    return model::RooflineSeconds<T>(compute_s_at_peak, memory_s_at_peak, params[0], params[1],
                                     params[2]);
  }
};

}  // namespace

const std::vector<std::string>& CalibratedOperatorNames() {
  static const std::vector<std::string> names{"expert_ffn", "router", "lm_head", "dense_ffn"};
  return names;
}

RooflineDevice RooflineFromHardware(const model::HardwareSpec& hardware, const std::string& device,
                                    const std::string& compute_dtype, int64_t threads) {
  RooflineDevice roofline;
  roofline.device = device;
  const std::string who = "hardware '" + hardware.name + "'";
  if (device == "cpu") {
    if (!hardware.host)
      throw base::Error(who +
                        " names no host CPU (field 'host'): it cannot describe a CPU profile");
    const model::HostSpec& host = *hardware.host;
    const model::RooflineTarget target = model::HostTargetOf(hardware, threads, compute_dtype);
    roofline.peak_flops = target.peak_flops;
    roofline.compute_dtype = target.dtype_used;
    roofline.bandwidth_bytes_per_s = target.bandwidth_bytes_per_s;
    roofline.source = who + " host " + host.cpu_name + ", peak scaled to " +
                      std::to_string(threads) + " of " + std::to_string(host.cores) + " cores";
  } else if (device == "gpu") {
    if (!hardware.accelerator)
      throw base::Error(who + " has no accelerator: it cannot describe a GPU profile");
    const model::AcceleratorSpec& accelerator = *hardware.accelerator;
    roofline.peak_flops =
        model::PeakFlopsFor(accelerator.peak_flops, compute_dtype, &roofline.compute_dtype);
    roofline.bandwidth_bytes_per_s = accelerator.memory_bandwidth_bytes_per_s;
    roofline.source = who + " accelerator " + accelerator.display_name;
  } else {
    throw base::Error("profile device '" + device + "': expected cpu or gpu");
  }
  if (!(roofline.peak_flops > 0) || !(roofline.bandwidth_bytes_per_s > 0))
    throw base::Error(who + ": the " + device +
                      " needs a positive peak FLOP/s and memory bandwidth");
  return roofline;
}

namespace {

void RequireLimits(const Profile& profile) {
  if (!profile.limits) {
    throw base::Error(
        profile.origin +
        ": no field 'machine.limits' (profiles written before the profiler measured "
        "the machine's limits lack it): name the profiled machine's hardware preset instead");
  }
}

}  // namespace

int64_t ProfiledThreads(const Profile& profile) {
  const nlohmann::json& threads =
      profile.machine.contains("threads") ? profile.machine["threads"] : nlohmann::json();
  return threads.is_number_integer() ? threads.get<int64_t>() : 1;
}

model::HardwareSpec HardwareFromProfile(const Profile& profile) {
  RequireLimits(profile);
  model::HostSpec host;
  host.name = "profile:" + profile.origin;
  host.cpu_name = profile.machine.value("cpu", std::string("CPU")) + " (" +
                  std::to_string(profile.limits->threads) + " threads, as profiled)";
  host.cores = profile.limits->threads;
  for (const auto& [dtype, flops] : profile.limits->peak_flops) host.peak_flops[dtype] = flops;
  host.dram_bytes = profile.machine.value("memory_bytes", 0.0);
  host.dram_bandwidth_bytes_per_s = profile.limits->dram_read_bytes_per_s;
  double largest = 0;
  for (const ProfileSample& s : profile.samples) {
    if (s.op == "storage_read" && s.bytes > largest) {
      largest = s.bytes;
      host.storage_read_bandwidth_bytes_per_s = s.bytes / s.median_s;
    }
  }
  model::HardwareSpec hardware;
  hardware.name = host.name;
  hardware.display_name = host.cpu_name;
  hardware.kind = model::HardwareKind::kHost;
  hardware.host = host;
  hardware.sources = {"measured by moelab profile: " + profile.origin};
  return hardware;
}

RooflineDevice ProfiledRoofline(const Profile& profile,
                                const std::optional<model::HardwareSpec>& hardware,
                                const std::string& device, const std::string& compute_dtype) {
  if (hardware)
    return RooflineFromHardware(*hardware, device, compute_dtype, ProfiledThreads(profile));
  if (device != "cpu")
    throw base::Error("--device gpu needs --hardware: the profile measures no GPU limits");
  return RooflineFromLimits(profile, compute_dtype);
}

RooflineDevice RooflineFromLimits(const Profile& profile, const std::string& compute_dtype) {
  RequireLimits(profile);
  const auto peak = profile.limits->peak_flops.find(compute_dtype);
  if (peak == profile.limits->peak_flops.end()) {
    throw base::Error(profile.origin + ": field 'machine.limits.peak_flops' has no '" +
                      compute_dtype +
                      "' peak (the CPU lacks the instructions to measure it): name the profiled "
                      "machine's hardware preset instead");
  }
  RooflineDevice roofline;
  roofline.device = "cpu";
  roofline.peak_flops = peak->second;
  roofline.bandwidth_bytes_per_s = profile.limits->dram_read_bytes_per_s;
  roofline.compute_dtype = compute_dtype;
  roofline.source = "limits measured in " + profile.origin + " (" +
                    std::to_string(profile.limits->threads) + " threads)";
  return roofline;
}

CostCalibration CalibrateCosts(const Profile& profile, const RooflineDevice& roofline,
                               const model::CostParameters& assumed, const FitOptions& options) {
  assumed.Validate();
  options.Validate();
  const std::vector<std::string>& names = CalibratedOperatorNames();
  std::vector<RooflineCallRow> rows;
  std::vector<double> measured;
  std::vector<std::string> row_ops;
  for (const ProfileSample& s : profile.samples) {
    if (s.device != roofline.device || std::find(names.begin(), names.end(), s.op) == names.end())
      continue;
    if (s.flops < 0 || s.bytes < 0) {
      throw base::Error(
          profile.origin + ": samples[" + std::to_string(s.index) +
          "] has no 'flops' or 'bytes'; the calibration needs both (profile again with "
          "moelab profile)");
    }
    rows.push_back({s.flops / roofline.peak_flops, s.bytes / roofline.bandwidth_bytes_per_s});
    measured.push_back(s.median_s);
    row_ops.push_back(s.op);
  }
  if (static_cast<int>(rows.size()) < kMinimumPoints) {
    throw base::Error(profile.origin + ": " + std::to_string(rows.size()) +
                      " samples of expert_ffn, router, lm_head or " + "dense_ffn on device '" +
                      roofline.device + "'; the calibration needs at least " +
                      std::to_string(kMinimumPoints));
  }

  LeastSquaresModel model;
  model.description = "cost calibration of " + profile.origin;
  model.parameters = {{"compute_efficiency", 1e-3, 1.0},
                      {"memory_efficiency", 1e-3, 1.0},
                      {"kernel_launch_s", 0.0, 1e-2}};
  model.measured = measured;
  model.make_cost = [rows, measured](int row, const std::vector<double>& scale) {
    const size_t r = static_cast<size_t>(row);
    return MakeScaledRowCost<3>(rows[r], measured[r], 1.0 / measured[r], scale);
  };
  model.predict = [rows](const std::vector<double>& p, int row) {
    return rows[static_cast<size_t>(row)](p.data());
  };
  model.make_start = [assumed](int index, StartSampler& sampler) {
    if (index == 0) {
      // A zero launch start would leave the solver's scale for that coordinate arbitrary.
      return std::vector<double>{assumed.compute_efficiency, assumed.memory_efficiency,
                                 std::max(assumed.kernel_launch_s, 1e-6)};
    }
    return std::vector<double>{sampler.LogUniform(0.05, 1.0), sampler.LogUniform(0.1, 1.0),
                               sampler.LogUniform(1e-7, 1e-4)};
  };
  const LeastSquaresFit fit = SolveLeastSquares(model, options);

  CostCalibration result;
  result.profile = profile.origin;
  result.roofline = roofline;
  result.params = assumed;
  result.params.compute_dtype = roofline.compute_dtype;
  result.params.compute_efficiency = fit.params[0];
  result.params.memory_efficiency = fit.params[1];
  result.params.kernel_launch_s = fit.params[2];
  result.std_errors = fit.std_errors;
  result.at_bound = fit.at_bound;
  result.points = static_cast<int64_t>(rows.size());
  const std::vector<double> start{assumed.compute_efficiency, assumed.memory_efficiency,
                                  assumed.kernel_launch_s};
  const std::vector<double> before = PredictRows(model, start);
  const std::vector<double> after = PredictRows(model, fit.params);
  result.mape_assumed = ComputeMetrics(measured, before).mape;
  result.mape_calibrated = ComputeMetrics(measured, after).mape;
  for (const std::string& name : names) {
    std::vector<double> m, b, a;
    for (size_t i = 0; i < rows.size(); ++i) {
      if (row_ops[i] != name) continue;
      m.push_back(measured[i]);
      b.push_back(before[i]);
      a.push_back(after[i]);
    }
    if (m.empty()) continue;
    result.operators.push_back({name, static_cast<int64_t>(m.size()), ComputeMetrics(m, b).mape,
                                ComputeMetrics(m, a).mape});
  }
  // Which side of the roofline each point sits on tells whether its efficiency was seen at all.
  int compute_bound = 0;
  for (const RooflineCallRow& row : rows) {
    if (row.compute_s_at_peak / fit.params[0] > row.memory_s_at_peak / fit.params[1])
      ++compute_bound;
  }
  if (compute_bound == 0) {
    result.notes.push_back(
        "no sample is compute-bound under the fitted parameters: compute_efficiency is not "
        "determined by this profile (profile larger token counts)");
  } else if (compute_bound == static_cast<int>(rows.size())) {
    result.notes.push_back(
        "every sample is compute-bound: memory_efficiency is not determined by this profile");
  }
  for (size_t i = 0; i < fit.at_bound.size(); ++i) {
    if (!fit.at_bound[i]) continue;
    result.notes.push_back(
        model.parameters[i].name + " sits on its bound " + report::FormatNumber(fit.params[i], 3) +
        (i < 2 ? ": the operators reach the roofline's figure (or beat it), so the figure "
                 "understates this machine"
               : ""));
  }
  if (!fit.covariance_note.empty())
    result.notes.push_back("standard errors: " + fit.covariance_note);
  return result;
}

nlohmann::json CostCalibration::ToJson() const {
  nlohmann::json json;
  json["profile"] = profile;
  json["device"] = roofline.device;
  json["roofline"] = {{"source", roofline.source},
                      {"peak_flops", roofline.peak_flops},
                      {"bandwidth_bytes_per_s", roofline.bandwidth_bytes_per_s},
                      {"compute_dtype", roofline.compute_dtype}};
  const char* names[] = {"compute_efficiency", "memory_efficiency", "kernel_launch_s"};
  const double values[] = {params.compute_efficiency, params.memory_efficiency,
                           params.kernel_launch_s};
  nlohmann::json fitted = nlohmann::json::object();
  for (size_t i = 0; i < 3; ++i) {
    nlohmann::json entry = {{"value", values[i]}};
    entry["std_error"] = i < std_errors.size() && std_errors[i] ? nlohmann::json(*std_errors[i])
                                                                : nlohmann::json(nullptr);
    entry["at_bound"] = i < at_bound.size() && at_bound[i];
    fitted[names[i]] = entry;
  }
  json["parameters"] = fitted;
  json["points"] = points;
  json["mape_assumed_percent"] = mape_assumed;
  json["mape_calibrated_percent"] = mape_calibrated;
  nlohmann::json ops = nlohmann::json::array();
  for (const CalibratedOperator& op : operators) {
    ops.push_back({{"operator", op.op},
                   {"points", op.points},
                   {"mape_assumed_percent", op.mape_assumed},
                   {"mape_calibrated_percent", op.mape_calibrated}});
  }
  json["operators"] = ops;
  json["notes"] = notes;
  return json;
}

std::string CostCalibration::Summary() const {
  char text[256];
  std::snprintf(text, sizeof(text),
                "compute efficiency %.3f, memory efficiency %.3f, launch %.2g s (%lld %s samples "
                "of %s, MAPE %.1f %% -> %.1f %%)",
                params.compute_efficiency, params.memory_efficiency, params.kernel_launch_s,
                static_cast<long long>(points), roofline.device.c_str(), profile.c_str(),
                mape_assumed, mape_calibrated);
  return text;
}

}  // namespace moelab::fit
