#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "model/fiddler.h"
#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "policies/offload_policy.h"
#include "sim/event_queue.h"

namespace moelab::sim {

// Operation times for the offload simulator, all from model/forward_cost.h's analytic roofline
// (cost source "analytic-roofline") on one accelerator and its host:
//  - one routed expert with s tokens: the roofline of the "routed_experts" operator of a model
//    whose MoE layers have a single expert (E = K = 1, so N(s) = 1 expert is read), per layer:
//    launch + max(2 s P_expert / (peak x compute eff), (expert bytes + activations) / (bandwidth x
//    memory eff)) -- on the accelerator, or on the host CPU (its peak scaled by threads / cores,
//    its DRAM bandwidth) for CPU-run experts;
//  - the dense part of a layer (attention projections and core, norms, router, shared experts,
//    dense FFN) for a pass's shape: that operator's roofline time over the whole model divided
//    by the layers it covers (attention core at the pass's context, averaged over layers when
//    sliding windows alternate); embedding and LM head once per pass;
//  - transfers: bytes / host-link bandwidth + link latency (per direction); storage reads: bytes /
//    storage read bandwidth.
// Errors: hardware without one accelerator, a host, a host link or a storage bandwidth (naming the
// missing part), or a node of several accelerators (this simulator models one).
class CostModel {
 public:
  // `host_params` price what runs on the CPU (experts and dense layers placed there); the
  // accelerator's operators use `params`. They differ when a profile calibrated one device only.
  CostModel(const MoeModelSpec& model, const HardwareSpec& hardware, const CostParameters& params,
            const CostParameters& host_params, int64_t cpu_threads);

  Seconds ExpertSeconds(policies::Device device, int64_t tokens);

  struct DenseCost {
    std::vector<Seconds> layer_s;  // [transformer layer]
    Seconds embedding_s = 0;
    Seconds lm_head_s = 0;
  };
  const DenseCost& Dense(policies::Device device, const ForwardShape& shape);

  Seconds HostToDeviceSeconds(double bytes) const;
  Seconds DeviceToHostSeconds(double bytes) const;
  Seconds StorageReadSeconds(double bytes) const;

  // Fiddler's linear latency model from the same roofline: gpu_lat = the accelerator's time for
  // one token; trans_lat = one expert host -> device; cpu_lat(s) = the secant of the CPU's
  // roofline time through s = 1 and s = 128 (what a start-up calibration at two batch sizes
  // measures; exact at s = 1, and the CPU's compute-bound slope beyond its ridge point).
  FiddlerLatencyModel FiddlerLatency(int64_t expert_bytes);

  const std::string& accelerator_name() const { return accelerator_name_; }
  const std::string& cpu_name() const { return cpu_name_; }
  const std::string& compute_dtype() const { return compute_dtype_; }
  int64_t cpu_threads() const { return cpu_threads_; }

 private:
  const HardwareSpec& Target(policies::Device device) const {
    return device == policies::Device::kAccelerator ? accelerator_ : host_;
  }
  const CostParameters& ParamsOf(policies::Device device) const {
    return device == policies::Device::kAccelerator ? params_ : host_params_;
  }

  MoeModelSpec model_;
  MoeModelSpec single_expert_model_;
  HardwareSpec accelerator_;  // the node's accelerator alone
  HardwareSpec host_;         // the host CPU alone (peak scaled to the threads used)
  LinkSpec link_;
  double storage_bytes_per_s_ = 0;
  CostParameters params_;
  CostParameters host_params_;
  int64_t cpu_threads_ = 0;
  std::string accelerator_name_, cpu_name_, compute_dtype_;
  std::vector<Seconds> expert_s_[2];  // [device][tokens], negative = not computed yet
  std::map<std::tuple<int, int64_t, int64_t, int64_t, bool>, DenseCost> dense_;
};

}  // namespace moelab::sim
