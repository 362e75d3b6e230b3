#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "cli/options.h"
#include "fit/cost_calibration.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/preset_store.h"
#include "model/sd_plan.h"

namespace moelab::cli {

// Where `plan sd` and `sim sd` take the times of an SD round from, chosen by their options:
//   --profile FIT.json                 the fitted latency curves of a measured profile
//                                      ("fitted-profile": the profiled machine, the executor's
//                                      shape of --model and --draft);
//   --hardware H --calibrate P.json    the roofline of H with efficiencies fitted to profile P
//                                      ("calibrated-roofline", cli/calibration_options.h);
//   --hardware H                       the roofline of H with `assumed` ("analytic-roofline").
void AddProfileCostOption(po::options_description& options);

struct SdCostSource {
  MoeModelSpec target, draft;  // with --profile, the executor shapes the profile measured
  HardwareSpec hardware;       // empty with --profile
  std::string hardware_name;   // the preset, or "profile:FIT.json"
  std::string display_name;
  CostParameters params;       // what the roofline used (unused with --profile)
  std::optional<CostCalibration> calibration;
  std::unique_ptr<SdStepCosts> costs;  // refers to the members above: the source never moves
};

// Errors: --profile together with --hardware or --calibrate; a fit of another model shape; what
// the calibration or the cost sources refuse.
std::unique_ptr<SdCostSource> MakeSdCostSource(const po::variables_map& values, const PresetStore& store,
                                               const CostParameters& assumed, int64_t context_length);

}  // namespace moelab::cli
