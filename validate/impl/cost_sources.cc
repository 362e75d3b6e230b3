#include "validate/impl/cost_sources.h"

#include "fit/cost_source_options.h"

namespace moelab::validate::impl {

std::shared_ptr<const model::CostSource> FittedCostSource(const fit::LatencyFit& fit,
                                                          const model::MoeModelSpec& target,
                                                          const std::string& device) {
  return fit::CostSources::FittedSource(fit, target, device);
}

std::shared_ptr<const model::CostSource> CalibratedCostSource(const fit::Profile& profile) {
  return fit::CostSources::ProfiledMachineRoofline(profile);
}

CostSources CostSourcesFor(const fit::LatencyFit& fit, const fit::Profile& profile,
                           const model::MoeModelSpec& target, bool on_gpu) {
  CostSources made;
  made.sources.push_back(FittedCostSource(fit, target, on_gpu ? "cuda:0" : "cpu"));
  if (on_gpu) {
    made.notes.push_back(
        "--device gpu: no calibrated-roofline predictions (the profile measures the CPU's limits, "
        "not the GPU's)");
  } else if (profile.limits) {
    made.sources.push_back(CalibratedCostSource(profile));
  } else {
    made.notes.push_back(
        "the profile has no measured machine limits: no calibrated-roofline predictions");
  }
  return made;
}

}  // namespace moelab::validate::impl
