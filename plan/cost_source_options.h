#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/cost_calibration.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "model/cost_source.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/preset_store.h"

namespace moelab::plan {

// How a prediction chooses its cost source; every prediction command takes the same three ways:
//   --hardware H                      the roofline of H with `assumed` (analytic-roofline)
//   --hardware H --calibrate P.json   the roofline of H with efficiencies fitted to profile P
//                                     (calibrated-roofline; --profiled-hardware names the preset
//                                     P was measured on, else its measured limits or H itself)
//   --profile FIT.json                the fitted latency curves of a measured profile
//                                     (fitted-profile: the profiled machine and layer shapes)
struct CostSourceOptions {
  std::string hardware;                          // preset or file; may be empty with --profile
  bool hardware_given = true;                    // false when --hardware was left at its default
  std::optional<std::string> calibrate_profile;  // --calibrate
  std::optional<std::string> profiled_hardware;  // --profiled-hardware
  std::optional<std::string> fitted_profile;     // --profile (a latency fit)
  model::CostParameters assumed;                 // the analytic parameters
  std::string explicit_efficiency;  // the first of --compute-efficiency etc. the user gave, or ""
  // Bits per weight the command was asked for explicitly (sim offload --expert-bits and
  // --attention-bits): with --profile, the fit must have measured those formats.
  std::optional<double> expert_bits;
  std::optional<double> attention_bits;

  // Errors naming the options: --profile with --hardware or --calibrate, --profiled-hardware
  // without --calibrate, efficiencies given together with --calibrate.
  void Validate() const;
};

// The sources a command's options choose, with the files they need loaded once.
class CostSources {
 public:
  CostSources(CostSourceOptions options, const model::PresetStore& store);

  const CostSourceOptions& options() const { return options_; }
  bool calibrated() const { return options_.calibrate_profile.has_value(); }
  bool fitted() const { return options_.fitted_profile.has_value(); }

  // The --calibrate profile (loaded on first use); error without --calibrate.
  const fit::Profile& CalibrationProfile();
  bool CalibrationProfileHas(const std::string& device);
  // The calibration of the profile's `device` samples ("cpu" or "gpu"); `predicted` is the
  // hardware being predicted (the roofline the samples are judged against when neither
  // --profiled-hardware nor measured limits say otherwise).
  fit::CostCalibration Calibrate(const std::string& device, const model::HardwareSpec& predicted);

  // The --profile fit (loaded on first use); error without --profile.
  const fit::LatencyFit& Fit();

  // The source pricing what `hardware` computes with (its accelerators, else its host): analytic
  // or calibrated roofline. Calibrations made are appended to calibrations().
  std::shared_ptr<const model::CostSource> ForHardware(const model::HardwareSpec& hardware);

  // With --profile: `model` as the executor ran it for the profile (model::ProfiledModel::
  // ExecutorSpec: the recorded shape and weight formats), so the fit's curves price the bytes they
  // were measured on. Error (ProfiledModel::Require) when the options asked for other bits
  // (expert_bits, attention_bits) than the profile measured, or it measured another model.
  model::MoeModelSpec ProfiledTarget(const model::MoeModelSpec& model);

  // With --profile: the fitted source for the profiled target shape `profiled_target`
  // (ProfiledTarget; the source checks it against the fit's recorded shape and formats).
  std::shared_ptr<const model::CostSource> Fitted(const model::MoeModelSpec& profiled_target,
                                                  const std::string& device = "cpu");

  const std::vector<fit::CostCalibration>& calibrations() const { return calibrations_; }
  // The cost_source a report names for a roofline: "calibrated-roofline" or "analytic-roofline".
  static std::string RooflineName(bool calibrated);

 private:
  CostSourceOptions options_;
  const model::PresetStore& store_;
  std::unique_ptr<fit::Profile> profile_;
  std::unique_ptr<fit::LatencyFit> fit_;
  std::vector<fit::CostCalibration> calibrations_;
};

// The device whose operators `hardware` computes with: "gpu" with an accelerator, else "cpu".
std::string ComputeDeviceOf(const model::HardwareSpec& hardware);

}  // namespace moelab::plan
