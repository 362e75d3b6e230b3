#pragma once

#include <cstdint>
#include <string>

#include "model/hardware_spec.h"

namespace moelab::model {

// The one operator-level roofline every analytic and calibrated prediction is priced with
// (docs/model.md):
//   time(op) = launches x kernel_launch_s + max(flops / (peak x compute_efficiency),
//                                                bytes / (bandwidth x memory_efficiency)).
// model/forward_cost.cc prices a forward pass with it, sim/ prices the offload simulator's
// operations through a cost source built on it, fit/cost_calibration.cc fits its efficiencies.

// The operators of a forward pass, as cost sources price them and reports name them.
enum class Operator {
  kAttentionProjections,  // q, k, v and output projections
  kAttentionCore,         // scores and values over the KV cache
  kAttention,             // projections and core together (what a profile measures)
  kRouter,
  kRoutedExperts,
  kSharedExperts,
  kDenseFfn,
  kNormsResidual,
  kEmbedding,
  kLmHead,
  kCommunication,  // tensor-parallel all-reduces
  kBeamSelection,  // after a beam search step's pass: each beam's next tokens ranked over the
                   // vocabulary (ForwardShape::ranked_rows)
};
inline constexpr int kOperatorCount = 12;

// "attention_projections", "routed_experts", ... (the names reports and profiles use).
const char* OperatorName(Operator op);

// Which layers one pass's instances of an operator belong to.
enum class OperatorScope { kEveryLayer, kMoeLayers, kDenseLayers, kOncePerPass };
OperatorScope ScopeOf(Operator op);

// Efficiency factors are parameters (calibrated by profiles), not constants in the code.
struct CostParameters {
  std::string compute_dtype = "bf16";
  double compute_efficiency = 0.7;  // fraction of peak FLOP/s that GEMMs reach
  double memory_efficiency = 0.8;   // fraction of peak bandwidth that weight streaming reaches
  double kernel_launch_s = 4e-6;    // fixed cost per operator launch
  double kv_bits = 16;
  double activation_bits = 16;

  void Validate() const;  // efficiencies in (0, 1], times >= 0, bits in (0, 32]
};

// What computes, in the units the roofline needs.
struct RooflineTarget {
  std::string name;                  // display name
  double peak_flops = 0;             // of one device, for the dtype used
  double bandwidth_bytes_per_s = 0;  // of one device
  double memory_bytes = 0;           // of one device
  int64_t devices = 1;               // tensor-parallel devices sharing every operator
  double interconnect_bytes_per_s = 0;
  double interconnect_latency_s = 0;
  std::string dtype_used;  // the peak actually used (fallback when the device lacks the dtype)
};

// The accelerators of `hardware` (a node of several: tensor-parallel), or its host CPU when it has
// none. Errors: a link or other part that does not compute; several accelerators without an
// interconnect.
RooflineTarget ComputeTargetOf(const HardwareSpec& hardware, const std::string& compute_dtype);

// The host CPU of `hardware` running on `threads` of its cores: its peak scaled by
// min(1, threads / cores) (the kernels use one core per thread), its whole DRAM bandwidth.
// Error when `hardware` names no host.
RooflineTarget HostTargetOf(const HardwareSpec& hardware, int64_t threads,
                            const std::string& compute_dtype);

// The roofline of one operator call from its times at peak (flops / peak, bytes / bandwidth).
// A template so that the calibration fit (fit/cost_calibration.cc) differentiates it with Ceres.
template <typename T>
T RooflineSeconds(double compute_s_at_peak, double memory_s_at_peak, const T& compute_efficiency,
                  const T& memory_efficiency, const T& kernel_launch_s, double launches = 1.0) {
  const T compute = T(compute_s_at_peak) / compute_efficiency;
  const T memory = T(memory_s_at_peak) / memory_efficiency;
  return T(launches) * kernel_launch_s + (compute > memory ? compute : memory);
}

// One call of an operator of `flops` and `bytes` (whole operator; split evenly over the target's
// devices) with `launches` kernel launches.
double RooflineSeconds(const RooflineTarget& target, const CostParameters& params, double flops,
                       double bytes, double launches = 1.0);

}  // namespace moelab::model
