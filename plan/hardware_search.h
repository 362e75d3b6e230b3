#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fit/cost_calibration.h"
#include "model/model_spec.h"
#include "model/preset_store.h"
#include "fit/cost_source_options.h"
#include "routing/routing_spec.h"

namespace moelab::plan {

// `moelab plan hardware`: the smallest listed hardware (least total accelerator memory, then fewest
// devices) whose TPOT and TTFT meet the targets, with everything resident in accelerator memory.
// Candidates: every accelerator preset at each device count. With --calibrate, the profile's own
// machine (CPU samples: its measured limits, or a host --profiled-hardware) is a candidate too,
// priced with the efficiencies fitted to its samples, and GPU samples calibrate every accelerator
// candidate (their roofline: --profiled-hardware).
struct HardwareSearchRequest {
  std::string model;
  int64_t batch = 1;
  int64_t prompt = 512;    // TTFT
  int64_t context = 1024;  // TPOT
  std::optional<double> tpot_max_s, ttft_max_s;
  std::vector<int64_t> device_counts{1, 2, 4, 8};
  fit::CostSourceOptions cost;   // --hardware is not used: every preset is a candidate
  routing::RoutingSpec routing;  // how the model's tokens route (distinct experts per pass)
  uint64_t routing_seed = 1;

  void Validate() const;  // Error naming the option
};

struct HardwareCandidate {
  std::string hardware;
  int64_t devices = 0;  // 0: the profiled machine (a host)
  double memory_bytes = 0;
  bool fits = false;
  std::optional<double> tpot_s, ttft_s;  // when it fits
  bool meets = false;
  std::string cost_source;
};

struct HardwareSearchResult {
  model::MoeModelSpec model;
  HardwareSearchRequest request;
  std::string cost_source;  // the accelerators'
  std::string routing = "uniform";
  std::vector<HardwareCandidate> candidates;  // smallest first
  std::optional<std::string> smallest;        // the first that meets the targets
  std::vector<fit::CostCalibration> calibrations;
};

HardwareSearchResult SearchHardware(const HardwareSearchRequest& request,
                                    const model::PresetStore& store);

}  // namespace moelab::plan
