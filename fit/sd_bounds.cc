#include "fit/sd_bounds.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "model/forward_cost.h"
#include "model/parameter_count.h"

namespace moelab::fit {
namespace {

struct Bandwidth {
  double bytes_per_s = 0;  // all devices together
  int64_t devices = 1;
};

Bandwidth BandwidthOf(const model::HardwareSpec& hardware) {
  Bandwidth bandwidth;
  if (hardware.has_accelerator()) {
    bandwidth.devices = hardware.accelerator_count;
    bandwidth.bytes_per_s = hardware.accelerator->memory_bandwidth_bytes_per_s *
                            static_cast<double>(hardware.accelerator_count);
  } else if (hardware.host) {
    bandwidth.bytes_per_s = hardware.host->dram_bandwidth_bytes_per_s;
  } else {
    throw base::Error(
        "hardware '" + hardware.name + "' is a " + ToString(hardware.kind) +
        ", not something that computes; the sd fit needs an accelerator, node or host");
  }
  if (!(bandwidth.bytes_per_s > 0)) {
    throw base::Error("hardware '" + hardware.name +
                      "' has no memory bandwidth: the sd fit's bounds need it");
  }
  return bandwidth;
}

}  // namespace

SdFitScales ComputeSdFitScales(const model::MoeModelSpec& target, const model::MoeModelSpec& draft,
                               const model::HardwareSpec& hardware,
                               const std::vector<SdMeasurement>& measurements,
                               std::optional<double> max_reject_s) {
  if (!target.is_moe()) {
    throw base::Error("target model '" + target.name +
                      "' is dense: the MoESD fit bounds k2 by the load time of a routed expert");
  }
  const Bandwidth bandwidth = BandwidthOf(hardware);
  const model::WeightBytes target_bytes = model::CountWeightBytes(target);
  const model::WeightBytes draft_bytes = model::CountWeightBytes(draft);
  const double moe_layers = static_cast<double>(target.num_moe_layers());
  const double routed_bytes =
      moe_layers * static_cast<double>(target.moe->num_experts) * target_bytes.expert;

  SdFitScales scales;
  scales.model = target.name;
  scales.draft = draft.name;
  scales.hardware = hardware.name;
  scales.bandwidth_bytes_per_s = bandwidth.bytes_per_s;
  scales.devices = bandwidth.devices;
  scales.t_dense_s = (target_bytes.total - routed_bytes) / bandwidth.bytes_per_s;
  scales.t_expert_s = moe_layers * target_bytes.expert / bandwidth.bytes_per_s;
  scales.t_draft_s = draft_bytes.total / bandwidth.bytes_per_s;
  scales.ridge_point_tokens =
      model::RidgePointTokens(hardware, model::CostParameters{}, target.bits.experts);

  int64_t max_gamma = 1;
  for (const SdMeasurement& m : measurements) {
    scales.max_batch = std::max(scales.max_batch, m.point.batch);
    max_gamma = std::max(max_gamma, m.point.gamma);
  }
  if (max_reject_s) {
    if (!(std::isfinite(*max_reject_s) && *max_reject_s > 0)) {
      throw base::Error("--max-reject-s must be a finite number > 0");
    }
    scales.t_reject_max_s = *max_reject_s;
    scales.t_reject_source = "--max-reject-s";
  } else {
    const double bytes = 3.0 * 4.0 * static_cast<double>(target.vocab_size) *
                         static_cast<double>(scales.max_batch) * static_cast<double>(max_gamma + 1);
    scales.t_reject_max_s = bytes / bandwidth.bytes_per_s;
    std::ostringstream source;
    source << "derived: 3 fp32 vocab arrays x vocab " << target.vocab_size << " x B_max "
           << scales.max_batch << " x (gamma_max " << max_gamma << " + 1) / peak bandwidth";
    scales.t_reject_source = source.str();
  }
  for (double t :
       {scales.t_dense_s, scales.t_expert_s, scales.t_draft_s, scales.ridge_point_tokens}) {
    if (!(std::isfinite(t) && t > 0)) {
      throw base::Error("the sd fit's bounds are degenerate for target '" + target.name +
                        "', draft '" + draft.name + "' on '" + hardware.name +
                        "' (a load time or the ridge point is not > 0)");
    }
  }
  return scales;
}

SdBounds ComputeSdBounds(const SdFitScales& s) {
  const double inf = std::numeric_limits<double>::infinity();
  SdBounds b;
  b.lower = {s.t_dense_s, 0, s.t_expert_s, 0, s.t_draft_s, 0, 0, 0, 0.2, 1.0};
  b.upper = {5 * s.t_dense_s,
             inf,
             5 * s.t_expert_s,
             inf,
             5 * s.t_draft_s,
             inf,
             s.t_reject_max_s,
             s.t_reject_max_s,
             1.0,
             2.0};
  return b;
}

}  // namespace moelab::fit
