#include "model/roofline.h"

#include <algorithm>

#include "base/error.h"
#include "base/limits.h"

namespace moelab::model {

const char* OperatorName(Operator op) {
  switch (op) {
    case Operator::kAttentionProjections:
      return "attention_projections";
    case Operator::kAttentionCore:
      return "attention_core";
    case Operator::kAttention:
      return "attention";
    case Operator::kRouter:
      return "router";
    case Operator::kRoutedExperts:
      return "routed_experts";
    case Operator::kSharedExperts:
      return "shared_experts";
    case Operator::kDenseFfn:
      return "dense_ffn";
    case Operator::kNormsResidual:
      return "norms_residual";
    case Operator::kEmbedding:
      return "embedding";
    case Operator::kLmHead:
      return "lm_head";
    case Operator::kCommunication:
      return "communication";
    case Operator::kBeamSelection:
      return "beam_selection";
  }
  return "unknown";
}

OperatorScope ScopeOf(Operator op) {
  switch (op) {
    case Operator::kRouter:
    case Operator::kRoutedExperts:
    case Operator::kSharedExperts:
      return OperatorScope::kMoeLayers;
    case Operator::kDenseFfn:
      return OperatorScope::kDenseLayers;
    case Operator::kEmbedding:
    case Operator::kLmHead:
    case Operator::kBeamSelection:
      return OperatorScope::kOncePerPass;
    default:
      return OperatorScope::kEveryLayer;
  }
}

void CostParameters::Validate() const {
  auto fraction = [](double value, const char* name) {
    if (!(value > 0 && value <= 1)) {
      throw base::Error(std::string("cost parameter '") + name + "' must be in (0, 1], got " +
                        std::to_string(value));
    }
  };
  fraction(compute_efficiency, "compute_efficiency");
  fraction(memory_efficiency, "memory_efficiency");
  // The name built once: every priced pass validates its parameters.
  static const std::string kLaunchName = "cost parameter 'kernel_launch_s'";
  base::CheckSeconds(kernel_launch_s, kLaunchName);
  if (!(kv_bits > 0 && kv_bits <= 32))
    throw base::Error("cost parameter 'kv_bits' must be in (0, 32]");
  if (!(activation_bits > 0 && activation_bits <= 32)) {
    throw base::Error("cost parameter 'activation_bits' must be in (0, 32]");
  }
}

RooflineTarget ComputeTargetOf(const HardwareSpec& hardware, const std::string& compute_dtype) {
  RooflineTarget target;
  if (hardware.has_accelerator()) {
    const AcceleratorSpec& a = *hardware.accelerator;
    target.name = a.display_name;
    target.peak_flops = PeakFlopsFor(a.peak_flops, compute_dtype, &target.dtype_used);
    target.bandwidth_bytes_per_s = a.memory_bandwidth_bytes_per_s;
    target.memory_bytes = a.memory_bytes;
    target.devices = hardware.accelerator_count;
    if (target.devices > 1) {
      if (!hardware.interconnect) {
        throw base::Error("hardware '" + hardware.name + "' has " + std::to_string(target.devices) +
                          " accelerators but no interconnect");
      }
      target.interconnect_bytes_per_s = hardware.interconnect->bandwidth_bytes_per_s;
      target.interconnect_latency_s = hardware.interconnect->latency_s;
      if (hardware.AcceleratorsPerMachine() < target.devices && hardware.scale_out) {
        // Tensor parallelism across machines: the ring's slowest hop is the scale-out network.
        target.interconnect_bytes_per_s =
            std::min(target.interconnect_bytes_per_s, hardware.scale_out->bandwidth_bytes_per_s);
        target.interconnect_latency_s =
            std::max(target.interconnect_latency_s, hardware.scale_out->latency_s);
      }
    }
  } else if (hardware.host) {
    const HostSpec& h = *hardware.host;
    target.name = h.cpu_name;
    target.peak_flops = PeakFlopsFor(h.peak_flops, compute_dtype, &target.dtype_used);
    target.bandwidth_bytes_per_s = h.dram_bandwidth_bytes_per_s;
    target.memory_bytes = h.dram_bytes;
  } else {
    throw base::Error("hardware '" + hardware.name + "' is a " + ToString(hardware.kind) +
                      ", not something that computes; choose an accelerator, node or host preset");
  }
  return target;
}

RooflineTarget HostTargetOf(const HardwareSpec& hardware, int64_t threads,
                            const std::string& compute_dtype) {
  if (!hardware.host) {
    throw base::Error("hardware '" + hardware.name + "' names no host CPU (field 'host')");
  }
  const HostSpec& host = *hardware.host;
  RooflineTarget target;
  target.name = host.cpu_name;
  const double cores = static_cast<double>(std::max<int64_t>(host.cores, 1));
  const double share = std::min(1.0, static_cast<double>(std::max<int64_t>(threads, 1)) / cores);
  target.peak_flops = PeakFlopsFor(host.peak_flops, compute_dtype, &target.dtype_used) * share;
  target.bandwidth_bytes_per_s = host.dram_bandwidth_bytes_per_s;
  target.memory_bytes = host.dram_bytes;
  return target;
}

double RooflineSeconds(const RooflineTarget& target, const CostParameters& params, double flops,
                       double bytes, double launches) {
  const double devices = static_cast<double>(target.devices);
  return RooflineSeconds<double>(
      flops / devices / target.peak_flops, bytes / devices / target.bandwidth_bytes_per_s,
      params.compute_efficiency, params.memory_efficiency, params.kernel_launch_s, launches);
}

}  // namespace moelab::model
