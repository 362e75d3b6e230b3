#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"
#include "fit/cost_calibration.h"
#include "model/hardware_spec.h"
#include "model/preset_store.h"
#include "sim/offload_simulator.h"

namespace moelab::cli {

// The "preset calibrated by a profile" cost source, shared by plan sd, plan hardware, plan
// offload, sim sd and sim offload:
//   --calibrate PROFILE.json      a profile (moelab profile) whose GEMM samples fit the roofline's
//                                 compute_efficiency, memory_efficiency and kernel_launch_s
//   --profiled-hardware H         the hardware preset or file the profile was measured on
// Without --profiled-hardware the roofline the samples are judged against is the limits the
// profile measured (CPU samples), else the hardware being predicted (it is the machine profiled).
void AddCalibrationOptions(po::options_description& options);

bool WantsCalibration(const po::variables_map& values);

// Refuses --compute-efficiency / --memory-efficiency / --kernel-launch-s given together with
// --calibrate (both would set the same parameters).
void RefuseExplicitEfficiencies(const po::variables_map& values);

// Loads the --calibrate profile once.
const Profile& CalibrationProfile(const po::variables_map& values);

// Whether the --calibrate profile has samples of `device` ("cpu" or "gpu").
bool CalibrationProfileHas(const po::variables_map& values, const std::string& device);

// The calibration of the profile's `device` samples (see above for the roofline), starting from
// `assumed`. `predicted` is the hardware the command predicts.
CostCalibration CalibrateFromOptions(const po::variables_map& values, const PresetStore& store,
                                     const std::string& device, const HardwareSpec& predicted,
                                     const CostParameters& assumed);

// For the offload simulator: the --calibrate profile's CPU samples price the host's operators
// (config.host_cost) and its GPU samples, when any, the accelerator's (config.cost); sets
// config.cost_source. Returns the calibrations made (none without --calibrate).
std::vector<CostCalibration> CalibrateSimCosts(const po::variables_map& values, const PresetStore& store,
                                               sim::SimConfig& config);

// The device whose operators `hardware` computes with: "gpu" with an accelerator, else "cpu".
std::string ComputeDeviceOf(const HardwareSpec& hardware);

// The cost_source a report names: "calibrated-roofline" with a calibration, else "analytic-roofline".
std::string CostSourceName(bool calibrated);

}  // namespace moelab::cli
