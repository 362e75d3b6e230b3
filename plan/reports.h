#pragma once

#include <string>

#include "plan/hardware_search.h"
#include "plan/offload_sweep.h"
#include "plan/sd_sweep.h"
#include "report/row_set.h"

namespace moelab::plan {

// How the planners' results print themselves (text table, JSON with provenance, CSV of the rows),
// through report/row_set.h so the three formats never disagree. Schemas: docs/schemas.md.
std::string RenderSdPlan(const SdSweepResult& result, report::Format format);   // moelab.plan_sd/1
std::string RenderSdSweep(const SdSweepResult& result, report::Format format);  // moelab.sim_sd/1
std::string Render(const HardwareSearchResult& result,
                   report::Format format);  // moelab.plan_hardware/1
std::string Render(const OffloadSweepResult& result,
                   report::Format format);  // moelab.plan_offload/1
// moelab.sim_offload/1 (SimResult::ToJson with the bits, cost parameters and calibrations); CSV:
// that JSON's scalars as one row.
std::string Render(const OffloadRunResult& run, report::Format format);

}  // namespace moelab::plan
