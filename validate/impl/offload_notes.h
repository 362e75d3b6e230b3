#pragma once

#include <string>
#include <vector>

#include "fit/latency_profile.h"
#include "validate/impl/offload_judge.h"
#include "validate/impl/offload_state.h"
#include "validate/validation_case.h"

namespace moelab::validate::impl {

// The notes OffloadValidation::Judge adds to validation.json, in the order they appear.

// How reads were priced: the executor's reader alone and beside computation, the computation's
// rate beside it, the plain probe and the bare disk by reads in flight.
std::vector<std::string> ProbeNotes(const OffloadState& st, const fit::Profile& profile,
                                    const OffloadPricing& pricing);

// What the cases' median abs errors would have been, priced otherwise: at the neighbours' reads,
// with the computation uncoupled from the reads, at the plain probe, from the profile alone.
std::vector<std::string> AlternativePricingNotes(const AlternativeErrors& errors,
                                                 const fit::Profile& profile);

// A workload's all-in-RAM baseline `c`, predicted against measured.
std::string BaselineNote(const ValidationCase& c, const JudgedBaseline& judged);

}  // namespace moelab::validate::impl
