#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/fit_options.h"
#include "fit/latency_profile.h"
#include "model/forward_cost.h"
#include "model/hardware_spec.h"

namespace moelab::fit {

// "A preset calibrated by a profile": the analytic roofline (model/forward_cost.h) with its
// efficiency parameters fitted to a measured profile instead of assumed.
//
// Every profiled GEMM-shaped operator (expert_ffn, router, lm_head, dense_ffn: they stream their
// weights, recorded with their FLOPs and bytes) of one device is one point, and the roofline of
// one operator call,
//   t = kernel_launch_s + max(flops / (peak x compute_efficiency),
//                             bytes / (bandwidth x memory_efficiency)),
// is fitted to the measured medians by relative least squares (fit/least_squares.h). The peak and
// bandwidth are the profiled device's: a hardware preset's figures (efficiencies then mean
// "fraction of the datasheet", what the preset needs), or the limits the profiler measured on the
// same machine (machine.limits: "fraction of what this machine can do", which transfers to a
// preset under the assumption that the same kernels reach the same fraction of its limits).

// The roofline a profile is calibrated against.
struct RooflineDevice {
  std::string device;  // the profile's device name: "cpu" or "gpu"
  std::string source;  // e.g. "hardware 'epyc-9654' host, peak scaled to 2 of 96 cores"
  double peak_flops = 0;
  double bandwidth_bytes_per_s = 0;
  std::string compute_dtype;  // whose peak
};

// The host (device "cpu", peak scaled to the profile's `threads` of the host's cores, as the
// offload simulator scales its CPU) or the accelerator (device "gpu") of `hardware`. Errors name
// the missing part.
RooflineDevice RooflineFromHardware(const model::HardwareSpec& hardware, const std::string& device,
                                    const std::string& compute_dtype, int64_t threads);

// The profiled machine as a host hardware spec: cores = the threads the profile ran, peak FLOP/s
// and DRAM bandwidth from machine.limits, memory from machine.memory_bytes, storage read bandwidth
// from the largest storage_read sample (0 when none). Named "profile:<file>". Error when the
// profile has no machine.limits.
model::HardwareSpec HardwareFromProfile(const Profile& profile);

// The threads the profile ran its CPU operators on (machine.threads; 1 when absent).
int64_t ProfiledThreads(const Profile& profile);

// The CPU limits the profile measured (machine.limits). Error when the profile has none or no
// peak for `compute_dtype`.
RooflineDevice RooflineFromLimits(const Profile& profile, const std::string& compute_dtype);

// What `moelab fit calibrate` judges a profile's `device` samples against: `hardware`'s device
// when given, else (CPU samples only) the limits the profile measured. Error for GPU samples
// without hardware.
RooflineDevice ProfiledRoofline(const Profile& profile,
                                const std::optional<model::HardwareSpec>& hardware,
                                const std::string& device, const std::string& compute_dtype);

struct CalibratedOperator {
  std::string op;
  int64_t points = 0;
  double mape_assumed = 0;     // percent, with the uncalibrated CostParameters
  double mape_calibrated = 0;  // percent, with the fitted ones
};

struct CostCalibration {
  std::string profile;  // file
  RooflineDevice roofline;
  model::CostParameters params;  // compute_efficiency, memory_efficiency, kernel_launch_s fitted
  std::vector<std::optional<double>> std_errors;  // the three, in that order
  std::vector<bool> at_bound;
  int64_t points = 0;
  double mape_assumed = 0;
  double mape_calibrated = 0;
  std::vector<CalibratedOperator> operators;
  std::vector<std::string> notes;

  nlohmann::json ToJson() const;
  std::string Summary() const;  // one line: parameters and error
};

// The operators whose samples calibrate the roofline.
const std::vector<std::string>& CalibratedOperatorNames();

// Fits `assumed`'s three efficiency parameters (its dtype and bits are kept) to the samples of
// `roofline.device`. Throws moelab::Error naming the profile: fewer than 4 usable samples,
// samples without flops/bytes, no start converging.
CostCalibration CalibrateCosts(const Profile& profile, const RooflineDevice& roofline,
                               const model::CostParameters& assumed, const FitOptions& options);

}  // namespace moelab::fit
