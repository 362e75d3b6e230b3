#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "fit/sd_measurements.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/moesd_speedup.h"

namespace moelab::fit {

// The physical time scales that bound the MoESD fit (formulas.md section 1, "Fit"), computed from
// the target model, the draft model and the hardware through model/. "Theoretical minimum" load
// times use the peak memory bandwidth with no efficiency factor; on a node of g accelerators the
// weights are split g ways (tensor parallel, as in model/forward_cost.h), so every time divides by
// g. Without an accelerator the host's DRAM bandwidth applies.
//
//   t_dense_s  = (total weight bytes - routed expert bytes) / bandwidth
//                (everything but the routed experts: attention, norms, routers, shared experts,
//                dense layers, embeddings and LM head, as the issue specifies)
//   t_expert_s = moe_layers * bytes of one expert / bandwidth
//                k2 multiplies N, the activated experts *per layer*, so k2 * N is the whole
//                pass's expert traffic only if k2 is the time to load one expert in every MoE
//                layer; with one layer's expert, k2 * 64 would be 1/28 of Qwen2-57B's expert
//                bytes and the bound would force unphysical fits
//   t_draft_s  = draft total weight bytes / bandwidth
//   t_reject_max_s (T_rej, the bound of reject_bias and reject_k): the paper uses the largest
//                measured rejection-sampling time, which speedup measurements do not contain. By
//                default it is derived from the hardware: rejection sampling reads the target's
//                and the draft's fp32 probabilities and writes the residual over the vocabulary
//                for every verified position, 3 * 4 bytes * vocab * B_max * (gamma_max + 1), at
//                peak bandwidth; `max_reject_s` (CLI --max-reject-s) overrides it.
//   ridge_point_tokens = RidgePointTokens(hardware, CostParameters{}, target expert bits).
struct SdFitScales {
  std::string model;                 // target preset name
  std::string draft;                 // draft preset name
  std::string hardware;              // hardware preset name
  double bandwidth_bytes_per_s = 0;  // peak, all devices together
  int64_t devices = 1;
  double t_dense_s = 0;
  double t_expert_s = 0;
  double t_draft_s = 0;
  double t_reject_max_s = 0;
  std::string t_reject_source;  // "--max-reject-s" or the derivation with its numbers
  double ridge_point_tokens = 0;
  int64_t max_batch = 1;  // of the measurements (start ranges)
};

// Refuses (moelab::Error) a dense target (no routed experts: the k2 bound is empty), hardware
// with no memory bandwidth, and a non-positive max_reject_s.
SdFitScales ComputeSdFitScales(const model::MoeModelSpec& target, const model::MoeModelSpec& draft,
                               const model::HardwareSpec& hardware,
                               const std::vector<SdMeasurement>& measurements,
                               std::optional<double> max_reject_s);

// Bounds per parameter, in MoesdParams order; +infinity where the paper sets no upper bound:
//   bias [t_dense, 5 t_dense], k1 >= 0, k2 [t_expert, 5 t_expert], k3 >= 0,
//   draft_bias [t_draft, 5 t_draft], draft_k >= 0, reject_bias and reject_k [0, T_rej],
//   lambda [0.2, 1], s [1, 2].
struct SdBounds {
  std::array<double, model::MoesdParams::kCount> lower{};
  std::array<double, model::MoesdParams::kCount> upper{};
};

SdBounds ComputeSdBounds(const SdFitScales& scales);

}  // namespace moelab::fit
