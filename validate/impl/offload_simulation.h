#pragma once

#include <memory>
#include <string>

#include "fit/latency_profile.h"
#include "model/cost_source.h"
#include "model/hardware_spec.h"
#include "sim/offload_simulator.h"
#include "validate/impl/offload_run.h"
#include "validate/validation_case.h"

namespace moelab::validate::impl {

// The storage tier's read bandwidth as the simulator is given it: alone, and while the host
// computes (0: the same). All zero: the profile's own (its expert_reader samples).
struct StorageRates {
  double alone_bytes_per_s = 0;
  double beside_compute_bytes_per_s = 0;
  // The computation's rate beside the reader's passes against alone (TimeReaderPass); 0: the
  // simulator's computation does not slow while reads are in flight.
  double measured_compute_rate = 0;
};

// The simulator's rate of the computation while reads are in flight, from `storage`'s measured one:
// an expert's checksum and copy at the link's bandwidth, one read landing every expert's bytes at
// the bandwidth beside computation (fit::ComputeRateWhileReading). 1 where nothing was measured.
double CoupledComputeRate(const StorageRates& storage, double expert_bytes,
                          double link_bytes_per_s);

// Case `c` on the offload simulator, this machine as its hardware (the profile's storage tier
// with `storage`'s read bandwidths) and `costs` pricing compute on `threads` cores, replaying
// `recorded`'s routing and gate signals. Error when a decode gets no TPOT.
sim::SimResult Simulate(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                        const fit::Profile& profile, const StorageRates& storage,
                        const std::shared_ptr<const model::CostSource>& costs, int threads,
                        bool record_timeline = false);

// The case's quantity in a simulation: TTFT for a prefill, else TPOT.
double PredictedQuantity(const sim::SimResult& simulated, bool prefill);

// The line of a storage-tier hardware's sources that says how its reads were priced.
std::string ReadPricingSource(const model::HardwareSpec& hardware);

}  // namespace moelab::validate::impl
