#include "cli/cost_options.h"

#include "base/limits.h"
#include "cli/output.h"

namespace moelab::cli {

void AddCostSourceOptions(po::options_description& options, ProfileRole profile) {
  const model::CostParameters defaults;
  const char* profile_help =
      profile == ProfileRole::kInsteadOfHardware
          ? "a latency fit (moelab fit latency) of a profile of this model: the fitted-profile "
            "cost source, instead of --hardware"
      : profile == ProfileRole::kBesideHardware
          ? "a latency fit (moelab fit latency) of a profile of this model: the fitted-profile "
            "cost source prices the compute; --hardware (still required) gives the memory, links "
            "and the rest"
          : "not taken: this command compares hardware presets (--calibrate scales them by a "
            "profile)";
  options.add_options()("calibrate", po::value<std::string>(),
                        "profile (moelab profile) whose measured GEMMs fit the roofline's "
                        "efficiencies and launch cost: the calibrated-roofline cost source")(
      "profiled-hardware", po::value<std::string>(),
      "hardware preset or file the --calibrate profile was measured on (default: the limits the "
      "profile measured, else the hardware predicted)")("profile", po::value<std::string>(),
                                                        profile_help)(
      "dtype", po::value<std::string>()->default_value(defaults.compute_dtype),
      "compute data type whose peak FLOP/s applies")(
      "compute-efficiency",
      po::value<std::string>()->default_value(FormatNumber(defaults.compute_efficiency, 2)),
      "fraction of peak FLOP/s GEMMs reach, (0, 1]")(
      "memory-efficiency",
      po::value<std::string>()->default_value(FormatNumber(defaults.memory_efficiency, 2)),
      "fraction of peak bandwidth weight streaming reaches, (0, 1]")(
      "kernel-launch-s", po::value<std::string>()->default_value("4e-6"),
      "fixed seconds per operator launch");
}

void AddPredictionRoutingOptions(po::options_description& options, routing::RoutingSpec& spec,
                                 uint64_t& seed) {
  // clang-format off
  options.add_options()
      ("routing", ParsedInto(&spec, "uniform", routing::ParseRoutingSpec), "how the target's tokens route, for the distinct experts a pass reads: uniform (closed form), trace:FILE (moelab run --trace-out), popularity:FILE or correlated[:locality=P,layer=P,popularity=FILE]")
      ("routing-seed", Into(&seed), "seed of the sampled routing estimate");
  // clang-format on
}

fit::CostSourceOptions CostSourceOptionsFrom(const po::variables_map& values) {
  fit::CostSourceOptions options;
  if (values.count("hardware")) {
    options.hardware = values["hardware"].as<std::string>();
    options.hardware_given = !values["hardware"].defaulted();
  } else {
    options.hardware_given = false;
  }
  if (values.count("calibrate")) options.calibrate_profile = values["calibrate"].as<std::string>();
  if (values.count("profiled-hardware"))
    options.profiled_hardware = values["profiled-hardware"].as<std::string>();
  if (values.count("profile")) options.fitted_profile = values["profile"].as<std::string>();
  for (const char* option : {"compute-efficiency", "memory-efficiency", "kernel-launch-s"}) {
    if (options.explicit_efficiency.empty() && values.count(option) &&
        !values[option].defaulted()) {
      options.explicit_efficiency = option;
    }
  }
  options.assumed.compute_dtype = values["dtype"].as<std::string>();
  options.assumed.compute_efficiency =
      base::ParseNumber(values["compute-efficiency"].as<std::string>(), "compute-efficiency");
  options.assumed.memory_efficiency =
      base::ParseNumber(values["memory-efficiency"].as<std::string>(), "memory-efficiency");
  options.assumed.kernel_launch_s = base::CheckSeconds(
      base::ParseNumber(values["kernel-launch-s"].as<std::string>(), "kernel-launch-s"),
      "--kernel-launch-s");
  return options;
}

}  // namespace moelab::cli
