#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "model/cost_source.h"
#include "model/model_spec.h"

namespace moelab::validate::impl {

// The cost sources validate judges, chosen in one place from the fit and the profile (the in-memory
// cases and --cases offload price with the same ones) by fit/cost_source_options.h.

// "fitted-profile": the fit's latency curves of `device` ("cpu" or "cuda:0") pricing `target`.
std::shared_ptr<const model::CostSource> FittedCostSource(const fit::LatencyFit& fit,
                                                          const model::MoeModelSpec& target,
                                                          const std::string& device);

// "calibrated-roofline": the profiled machine's measured limits with the efficiencies its samples
// fit, at the dtype whose peak it measured (bf16 where the CPU has it, else fp32). The profile
// must have machine limits.
std::shared_ptr<const model::CostSource> CalibratedCostSource(const fit::Profile& profile);

// --reused-profile's source: `fit`'s curves (a profile taken before the run) as FittedCostSource
// prices them, named kReusedProfileSource so its predictions are judged and summarized apart from
// the headline profile's; Describe() adds the profile's path.
std::shared_ptr<const model::CostSource> ReusedProfileCostSource(const fit::LatencyFit& fit,
                                                                 const model::MoeModelSpec& target,
                                                                 const std::string& device);

// Every source the in-memory cases are judged with: the fitted profile, and the calibrated
// roofline on a CPU whose profile has limits; `notes` says why one is missing.
struct CostSources {
  std::vector<std::shared_ptr<const model::CostSource>> sources;
  std::vector<std::string> notes;
};
CostSources CostSourcesFor(const fit::LatencyFit& fit, const fit::Profile& profile,
                           const model::MoeModelSpec& target, bool on_gpu);

}  // namespace moelab::validate::impl
