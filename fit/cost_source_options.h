#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/cost_calibration.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "model/collective_cost.h"
#include "model/cost_source.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/preset_store.h"
#include "model/roofline.h"

namespace moelab::fit {

// The one cost-source chooser: every prediction (plan sd, sim sd, plan hardware, plan offload, sim
// offload, validate) gets its model::CostSource objects here, and nowhere else builds one.
//
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

// The offload simulator's two devices priced (CostSources::ForOffload, AnalyticOffloadSources):
// the node's one accelerator and its host CPU on the simulator's threads. A device the hardware
// lacks (no accelerator, no host) has no source: the simulator refuses such hardware by name.
struct OffloadSources {
  model::MoeModelSpec model;  // the model to simulate (with --profile, the shape it measured)
  std::shared_ptr<const model::CostSource> accelerator, host;
  // The rooflines' parameters (what a report prints): the assumed ones, or those a profile
  // calibrated for the accelerator (GPU samples) and the host (CPU samples; unset: `accelerator`).
  model::CostParameters accelerator_params;
  std::optional<model::CostParameters> host_params;
  std::vector<CostCalibration> calibrations;  // those made
};

// The analytic rooflines of the offload simulator's devices: `hardware`'s accelerator alone with
// `params`, its host on `cpu_threads` threads (0: all its cores) with `host_params` (unset:
// `params`).
OffloadSources AnalyticOffloadSources(
    const model::MoeModelSpec& model, const model::HardwareSpec& hardware, int64_t cpu_threads,
    const model::CostParameters& params,
    const std::optional<model::CostParameters>& host_params = std::nullopt);

// The sources a command's options choose, with the files they need loaded once.
class CostSources {
 public:
  CostSources(CostSourceOptions options, const model::PresetStore& store);

  const CostSourceOptions& options() const { return options_; }
  bool calibrated() const { return options_.calibrate_profile.has_value(); }
  bool fitted() const { return options_.fitted_profile.has_value(); }

  // The --calibrate profile (loaded on first use); error without --calibrate.
  const Profile& CalibrationProfile();
  bool CalibrationProfileHas(const std::string& device);
  // The calibration of the profile's `device` samples ("cpu" or "gpu"); `predicted` is the
  // hardware being predicted (the roofline the samples are judged against when neither
  // --profiled-hardware nor measured limits say otherwise).
  CostCalibration Calibrate(const std::string& device, const model::HardwareSpec& predicted);

  // The calibration of `profile`'s `device` samples against the roofline of `measured_on` (the
  // hardware they were measured on) or, without it, the limits the profile measured (CPU only;
  // ProfiledRoofline): `moelab fit calibrate`, and Calibrate when the profiled machine is known.
  static CostCalibration CalibrateOn(const Profile& profile,
                                     const std::optional<model::HardwareSpec>& measured_on,
                                     const std::string& device,
                                     const model::CostParameters& assumed);

  // The --profile fit (loaded on first use); error without --profile.
  const LatencyFit& Fit();

  // The source pricing what `hardware` computes with (its accelerators, else its host): analytic
  // or calibrated roofline. Calibrations made are appended to calibrations().
  std::shared_ptr<const model::CostSource> ForHardware(const model::HardwareSpec& hardware);

  // With --profile: `model` as the executor ran it for the profile (model::ProfiledModel::
  // ExecutorSpec: the recorded shape and weight formats), so the fit's curves price the bytes they
  // were measured on. Error (ProfiledModel::Require) when the options asked for other bits
  // (expert_bits, attention_bits) than the profile measured, or it measured another model.
  model::MoeModelSpec ProfiledTarget(const model::MoeModelSpec& model);
  // With --profile and a draft: error when the fit's draft_decode curves measured another draft
  // than `draft` (its name; a fit that records none is not checked), since they price the
  // profiled draft whatever --draft names.
  void RequireProfiledDraft(const model::MoeModelSpec& draft);
  // The same check on a fit's recorded draft `measured` (LatencyFit::draft_name) read from `fit`.
  static void RequireDraft(const std::optional<std::string>& measured, const std::string& fit,
                           const model::MoeModelSpec& draft);

  // With --profile: the fitted source for the profiled target shape `profiled_target`
  // (ProfiledTarget), checked against the fit's recorded shape and formats.
  std::shared_ptr<const model::CostSource> Fitted(const model::MoeModelSpec& profiled_target,
                                                  const std::string& device = "cpu");

  // The offload simulator's devices (OffloadSources) from the options: with --calibrate, the
  // profile's CPU samples calibrate the host's roofline and its GPU samples (when any) the
  // accelerator's; with --profile, the fit's CPU curves price the host (and its GPU curves, when
  // any, the accelerator; on hardware whose compute device is its host, the CPU's curves price
  // both), the other device keeps its analytic roofline, and the model is ProfiledTarget's.
  // Errors: a profile with no samples or curves to use.
  OffloadSources ForOffload(const model::MoeModelSpec& model, const model::HardwareSpec& hardware,
                            int64_t cpu_threads);

  // The collectives the profile measured (`profile --collectives`), as fitted curves: with
  // --profile, the fit's all_to_all and all_reduce curves; with --calibrate, the profile's
  // collective samples fitted here (fit latency's forms and choice). nullptr when the profile
  // has none (or neither option was given): the caller prices collectives by its links.
  std::shared_ptr<const model::CollectiveCost> MeasuredCollectives();
  const std::vector<CostCalibration>& calibrations() const { return calibrations_; }
  // The cost_source a report names for a roofline: "calibrated-roofline" or "analytic-roofline".
  static std::string RooflineName(bool calibrated);

  // The roofline of `target` with `params`: analytic, or calibrated when `calibration` (which
  // fitted `params`) is given, named so and describing it.
  static std::shared_ptr<const model::CostSource> Roofline(
      const model::RooflineTarget& target, const model::CostParameters& params,
      const CostCalibration* calibration = nullptr);
  // The calibrated roofline of the machine `profile` measured: its measured limits with the
  // efficiencies its samples fit, at the dtype whose peak it measured (bf16 where the CPU has it,
  // else fp32). Error: a profile without machine.limits.
  static std::shared_ptr<const model::CostSource> ProfiledMachineRoofline(const Profile& profile);
  // The fitted-profile source of `fit` for its profiled target on `device`
  // (FittedProfileCostSource; the target is checked against what the profile measured).
  static std::shared_ptr<const model::CostSource> FittedSource(
      const LatencyFit& fit, const model::MoeModelSpec& profiled_target, const std::string& device);

 private:
  CostSourceOptions options_;
  const model::PresetStore& store_;
  std::unique_ptr<Profile> profile_;
  std::unique_ptr<LatencyFit> fit_;
  std::vector<CostCalibration> calibrations_;
};

// The device whose operators `hardware` computes with: "gpu" with an accelerator, else "cpu".
std::string ComputeDeviceOf(const model::HardwareSpec& hardware);

}  // namespace moelab::fit
