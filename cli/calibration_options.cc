#include "cli/calibration_options.h"

#include <map>
#include <memory>

#include "base/error.h"

namespace moelab::cli {

void AddCalibrationOptions(po::options_description& options) {
  options.add_options()
      ("calibrate", po::value<std::string>(), "profile (moelab profile) whose measured GEMMs fit the roofline's efficiencies and launch cost: the calibrated-roofline cost source")
      ("profiled-hardware", po::value<std::string>(), "hardware preset or file the --calibrate profile was measured on (default: the limits the profile measured, else the hardware predicted)");
}

bool WantsCalibration(const po::variables_map& values) { return values.count("calibrate") > 0; }

void RefuseExplicitEfficiencies(const po::variables_map& values) {
  if (values.count("profiled-hardware") && !WantsCalibration(values))
    throw Error("--profiled-hardware needs --calibrate PROFILE.json");
  if (!WantsCalibration(values)) return;
  for (const char* option : {"compute-efficiency", "memory-efficiency", "kernel-launch-s"}) {
    if (values.count(option) && !values[option].defaulted()) {
      throw Error(std::string("give --") + option + " or --calibrate, not both (the calibration fits it)");
    }
  }
}

const Profile& CalibrationProfile(const po::variables_map& values) {
  // One profile per process: a command calibrates against the file it was given, maybe twice.
  static std::map<std::string, std::unique_ptr<Profile>> loaded;
  const std::string path = values["calibrate"].as<std::string>();
  auto found = loaded.find(path);
  if (found == loaded.end()) found = loaded.emplace(path, std::make_unique<Profile>(LoadProfile(path))).first;
  return *found->second;
}

bool CalibrationProfileHas(const po::variables_map& values, const std::string& device) {
  for (const ProfileSample& sample : CalibrationProfile(values).samples) {
    if (sample.device == device) return true;
  }
  return false;
}

CostCalibration CalibrateFromOptions(const po::variables_map& values, const PresetStore& store,
                                     const std::string& device, const HardwareSpec& predicted,
                                     const CostParameters& assumed) {
  const Profile& profile = CalibrationProfile(values);
  if (!CalibrationProfileHas(values, device)) {
    throw Error(profile.origin + ": no samples on device '" + device + "', but hardware '" + predicted.name +
                "' computes there; calibrate with a profile measured on that device");
  }
  const int64_t threads = ProfiledThreads(profile);
  RooflineDevice roofline;
  if (values.count("profiled-hardware")) {
    roofline = RooflineFromHardware(store.LoadHardware(values["profiled-hardware"].as<std::string>()), device,
                                    assumed.compute_dtype, threads);
  } else if (device == "cpu" && profile.limits) {
    roofline = RooflineFromLimits(profile, assumed.compute_dtype);
  } else {
    roofline = RooflineFromHardware(predicted, device, assumed.compute_dtype, threads);
  }
  return CalibrateCosts(profile, roofline, assumed, FitOptions{});
}

std::vector<CostCalibration> CalibrateSimCosts(const po::variables_map& values, const PresetStore& store,
                                               sim::SimConfig& config) {
  std::vector<CostCalibration> made;
  if (!WantsCalibration(values)) return made;
  if (CalibrationProfileHas(values, "cpu")) {
    made.push_back(CalibrateFromOptions(values, store, "cpu", config.hardware, config.cost));
    config.host_cost = made.back().params;
  }
  if (CalibrationProfileHas(values, "gpu")) {
    made.push_back(CalibrateFromOptions(values, store, "gpu", config.hardware, config.cost));
    config.cost = made.back().params;
  }
  if (made.empty()) throw Error(CalibrationProfile(values).origin + ": no cpu or gpu samples to calibrate with");
  config.cost_source = CostSourceName(true);
  return made;
}

std::string ComputeDeviceOf(const HardwareSpec& hardware) { return hardware.has_accelerator() ? "gpu" : "cpu"; }

std::string CostSourceName(bool calibrated) { return calibrated ? "calibrated-roofline" : "analytic-roofline"; }

}  // namespace moelab::cli
