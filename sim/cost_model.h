#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/cost_source.h"
#include "model/fiddler.h"
#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "policies/offload_policy.h"
#include "sim/event_queue.h"

namespace moelab::sim {

// Operation times for the offload simulator on one accelerator and its host, each device priced by
// the cost source the caller chose (model/cost_source.h; fit/cost_source_options.h chooses: the
// roofline of the accelerator and of the host CPU on `cpu_threads` of its cores, analytic or
// calibrated, or a fitted profile).
//  - one routed expert with s tokens: the source's ExpertSeconds -- on the accelerator, or on the
//    host CPU for CPU-run experts;
//  - the dense part of a layer (every operator but the routed experts, the embedding and the LM
//    head) for a pass's shape: each operator's time over the whole model divided by the layers it
//    covers (ScopeOf: every layer, MoE layers, dense layers); embedding and LM head once per pass;
//  - transfers: bytes / host-link bandwidth + link latency (per direction); storage reads: bytes /
//    storage read bandwidth.
// Errors: hardware without one accelerator, a host, a host link or a storage bandwidth (naming the
// missing part), or a node of several accelerators (this simulator models one); a missing source.
// The name of an accelerator's and a host's sources together: their name when they share it; the
// calibrated roofline when the rooflines of both are priced, calibrated where the profile had
// samples ("calibrated-roofline"); else "A (accelerator) + B (host)", the measured one first.
std::string CostSourceName(const model::CostSource& accelerator, const model::CostSource& host);

class CostModel {
 public:
  // `host_source` prices what runs on the CPU (experts and dense layers placed there),
  // `accelerator_source` the accelerator's operators.
  CostModel(const model::MoeModelSpec& model, const model::HardwareSpec& hardware,
            int64_t cpu_threads, std::shared_ptr<const model::CostSource> accelerator_source,
            std::shared_ptr<const model::CostSource> host_source);

  Seconds ExpertSeconds(policies::Device device, int64_t tokens) {
    // Inline when priced before (every expert event asks): the call was a twentieth of a run.
    const std::vector<Seconds>& cache = expert_s_[device == policies::Device::kAccelerator ? 0 : 1];
    if (tokens >= 1 && static_cast<size_t>(tokens) < cache.size() &&
        cache[static_cast<size_t>(tokens)] >= 0)
      return cache[static_cast<size_t>(tokens)];
    return PriceExpert(device, tokens);
  }

  // The bytes the passes on `device` cycle through (model::PassWorkingSetBytes; 0, the default:
  // the whole model resident): what decides a fitted profile's cache regime
  // (ForwardShape::working_set_bytes). Forgets the times priced before.
  void SetWorkingSet(policies::Device device, double bytes);
  double working_set_bytes(policies::Device device) const;

  struct DenseCost {
    std::vector<Seconds> layer_s;  // [transformer layer]
    Seconds embedding_s = 0;
    Seconds lm_head_s = 0;  // with a beam step's ranking (ForwardShape::ranked_rows) after it
  };
  // Valid until the next Dense call for `device` or SetWorkingSet (only the latest shape of each
  // device is kept: a decode's context grows every pass, so older shapes never came back and a
  // map of them cost an allocation and a search per pass).
  const DenseCost& Dense(policies::Device device, const model::ForwardShape& shape);

  Seconds HostToDeviceSeconds(double bytes) const;
  Seconds DeviceToHostSeconds(double bytes) const;
  Seconds StorageReadSeconds(double bytes) const;

  // Fiddler's linear latency model from the same roofline: gpu_lat = the accelerator's time for
  // one token; trans_lat = one expert host -> device; cpu_lat(s) = the secant of the CPU's
  // roofline time through s = 1 and s = 128 (what a start-up calibration at two batch sizes
  // measures; exact at s = 1, and the CPU's compute-bound slope beyond its ridge point).
  model::FiddlerLatencyModel FiddlerLatency(int64_t expert_bytes);

  const model::CostSource& Source(policies::Device device) const {
    return device == policies::Device::kAccelerator ? *accelerator_source_ : *host_source_;
  }
  const std::string& accelerator_name() const { return accelerator_name_; }
  const std::string& cpu_name() const { return cpu_name_; }
  const std::string& compute_dtype() const { return compute_dtype_; }
  // What the report names the sources by (CostSourceName).
  std::string source_name() const { return CostSourceName(*accelerator_source_, *host_source_); }
  int64_t cpu_threads() const { return cpu_threads_; }

 private:
  Seconds PriceExpert(policies::Device device, int64_t tokens);  // ExpertSeconds, not cached yet

  model::MoeModelSpec model_;
  std::shared_ptr<const model::CostSource> accelerator_source_;
  std::shared_ptr<const model::CostSource> host_source_;
  model::LinkSpec link_;
  double storage_bytes_per_s_ = 0;
  int64_t cpu_threads_ = 0;
  std::string accelerator_name_, cpu_name_, compute_dtype_;
  double working_set_bytes_[2] = {0, 0};  // [device]
  std::vector<Seconds> expert_s_[2];      // [device][tokens], negative = not computed yet
  struct DenseEntry {
    bool priced = false;
    int64_t batch = 0, tokens_per_sequence = 0, context_length = 0;
    bool logits_for_all_positions = false;
    int64_t ranked_rows = 0;
    DenseCost cost;
  };
  DenseEntry dense_[2];  // [device]: its latest shape
};

}  // namespace moelab::sim
