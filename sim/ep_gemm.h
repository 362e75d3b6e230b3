#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_source.h"
#include "model/eps_moe.h"
#include "model/model_spec.h"

namespace moelab::sim {

// The two ways EPS-MoE runs a device's expert GEMMs (seed 001, "GroupGemm vs DenseGemm"): one
// GroupGemm launch over all the experts of a chunk, or one DenseGemm per expert in turn.
//
// Both start from the cost source's time for one expert on m tokens (CostSource::ExpertSeconds,
// whichever source prices it), which assumes the GEMM fills the device. On an accelerator whose SM
// count is known the GEMM is then tiled (tile_rows x tile_cols output tiles of the fused gate/up
// projection, one tile per SM at a time) and pays for the SMs it leaves idle. The full-device time
// t(m) is split into the roofline's two terms, read off the source itself: arithmetic
// min(t(m), m t(2^16) / 2^16) and weight reads min(t(m), t(1) - launch) (summed over a GroupGemm's
// experts), the rest of t(m) (the launch) paid as is; the GEMM takes the larger of
//   arithmetic x sms_total / min(tiles, sms) (the SMs it cannot fill and the SMs kept for
//     communication, EPS-MoE's SM control; persistent stream-K kernels balance the last wave, so
//     no wave quantization), and
//   weight reads x 1 / min(1, busy SMs / memory_saturation_sms) (EPS-MoE Figure 6: 40-60 SMs
//     saturate a memory-bound kernel; 50 assumed),
// continuous and non-decreasing in m (a threshold at a ridge parameter choosing one factor or the
// other made a chunk just below it 12 % cheaper than one just above).
// A DenseGemm of few rows fills few SMs; a GroupGemm fills them with the tiles of every expert in
// one launch (saving (experts - 1) launches) but runs its arithmetic at group_efficiency of a
// DenseGemm's (EPS-MoE Table 5: DenseGemm 4.299 ms vs GroupGemm 4.837 ms at m = 3072,
// [5120, 1536], 0.889). Where neither is known (a profiled CPU: sm_count 0) only the launches and
// group_efficiency differ.
struct ExpertGemmParameters {
  int64_t sm_count = 0;  // 0: unknown, no tiling
  int64_t tile_rows = 128;
  int64_t tile_cols = 128;
  double group_efficiency = 4.299 / 4.837;
  double memory_saturation_sms = 50;
  double kernel_launch_s = 4e-6;  // one launch, saved per expert a GroupGemm fuses

  void Validate() const;
};

enum class GemmChoice { kAuto, kGroup, kDense };
GemmChoice GemmChoiceFromString(const std::string& text);  // auto | group | dense
std::string ToString(GemmChoice choice);

class ExpertGemmModel {
 public:
  // `expert_model` is the model whose routed expert one device computes (its width already
  // divided by any expert tensor parallelism); `source` outlives the model.
  ExpertGemmModel(const model::CostSource& source, model::MoeModelSpec expert_model,
                  ExpertGemmParameters params);

  // Seconds for the experts of a chunk (`tokens_per_expert`, each >= 1) on `sms` SMs (ignored when
  // sm_count is 0; at most sm_count).
  double DenseSeconds(const std::vector<int64_t>& tokens_per_expert, int64_t sms) const;
  double GroupSeconds(const std::vector<int64_t>& tokens_per_expert, int64_t sms) const;
  double Seconds(model::ExpertGemmKind kind, const std::vector<int64_t>& tokens_per_expert,
                 int64_t sms) const;

  // The smallest tokens per expert (on a geometric grid up to `max_tokens`) at which `experts`
  // DenseGemms are no slower than one GroupGemm over them on `sms` SMs; nullopt when GroupGemm
  // stays faster up to `max_tokens`.
  std::optional<int64_t> CrossoverTokens(int64_t experts, int64_t sms,
                                         int64_t max_tokens = 1 << 17) const;

  const ExpertGemmParameters& params() const { return params_; }
  const model::MoeModelSpec& expert_model() const { return expert_model_; }

 private:
  int64_t Tiles(int64_t tokens) const;
  // A GEMM whose full-device time is `full_device_s`, of `rows` rows over `experts` experts and
  // `tiles` tiles, on `sms` SMs, its arithmetic at `compute_efficiency` of a DenseGemm's.
  double OnSms(double full_device_s, double rows, double experts, int64_t tiles, int64_t sms,
               double compute_efficiency) const;

  const model::CostSource& source_;
  model::MoeModelSpec expert_model_;
  ExpertGemmParameters params_;
  double one_row_s_ = 0;  // the source's one-expert time at 1 row less a launch: its weight reads
  double seconds_per_row_ = 0;  // its time per row at 2^16 rows: the arithmetic of one row
};

}  // namespace moelab::sim
