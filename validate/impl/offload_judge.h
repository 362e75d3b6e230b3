#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "model/cost_source.h"
#include "validate/impl/offload_run.h"
#include "validate/impl/offload_simulation.h"
#include "validate/impl/offload_state.h"
#include "validate/validation_metrics.h"

namespace moelab::validate::impl {

// The steps of OffloadValidation::Judge (validate/offload_cases.h), each with a typed result.

// Cases of the same workload on each side of a case whose reads are set beside its own: a few
// seconds of runs, inside the minutes over which this cloud disk's delivered bandwidth moves.
inline constexpr int kNeighbourReach = 2;

// How the simulator prices every case: the executor's shape, the fitted profile's costs on the
// pool's threads, and the reads at the executor's reader's bandwidths (the pairs of
// profiler::ProbeReaderPass: alone and beside computation), with the plain probe's median beside
// them (reported, and priced as an alternative).
struct OffloadPricing {
  Bench bench;
  std::shared_ptr<const model::CostSource> costs;
  int threads = 0;
  StorageRates storage;
  double plain_probe_bytes_per_s = 0;
};
// Error when no reader probe ran.
OffloadPricing PricingOf(const OffloadState& st, const fit::LatencyFit& fit);

// The predictions of the alternatives to the reader's probes, as median abs errors per
// [decode, prefill], and the neighbours' read bandwidths: what the notes compare.
struct AlternativeErrors {
  std::vector<double> neighbour_rates;
  std::vector<double> probe[2], neighbour[2], plain[2], profile[2];
  std::vector<double> uncoupled[2];  // the computation not slowed while reads are in flight
};

// Every case simulated and compared with its runs, in plan order (cost source "fitted-profile",
// routing the recorded trace), with the alternatives' errors; --timelines written.
struct JudgedCases {
  std::vector<CaseResult> results;
  AlternativeErrors errors;
};
JudgedCases JudgeCases(const OffloadState& st, const fit::Profile& profile,
                       const OffloadPricing& pricing);

// A workload's all-in-RAM baseline simulated (its timelines written) against its runs.
struct JudgedBaseline {
  double predicted = 0;
  Measured measured;
};
JudgedBaseline JudgeBaseline(const OffloadState& st, size_t index, const fit::Profile& profile,
                             const OffloadPricing& pricing);

}  // namespace moelab::validate::impl
