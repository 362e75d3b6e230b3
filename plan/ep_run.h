#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "fit/cost_source_options.h"
#include "model/preset_store.h"
#include "report/row_set.h"
#include "sim/ep_simulator.h"

namespace moelab::plan {

// `moelab sim ep`: the node and model loaded, one accelerator of the node priced by the cost
// source the options choose (fit::CostSources: its roofline, calibrated by --calibrate, or a
// --profile's fitted curves, which price the profiled shape of the model), the collectives by the
// curves fitted to the ones the profile measured (`profile --collectives`; fit::CostSources::
// MeasuredCollectives) when it has them, else by the node's links (the link collective model), then
// sim::SimulateEp. `config`'s model and node are filled here.
struct EpRunRequest {
  std::string model;     // preset or file
  std::string hardware;  // node preset or file (always needed: its links)
  sim::EpConfig config;  // its batch and tokens replaced by those below
  // Unset: one sequence per expert-parallel rank (the smallest batch data-parallel attention
  // takes), and kDefaultTokens positions, or as many as the model holds when it holds fewer.
  std::optional<int64_t> batch, tokens;
  static constexpr int64_t kDefaultTokens = 2048;  // EPS-MoE's middle prefill length
  fit::CostSourceOptions cost;
};

sim::EpResult RunEp(const EpRunRequest& request, const model::PresetStore& store);

// The result in `format`: the text summary and sweep, JSON with provenance, or the sweep as CSV.
std::string Render(const sim::EpResult& result, report::Format format);

}  // namespace moelab::plan
