#include "sim/ep_gemm.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace moelab::sim {

void ExpertGemmParameters::Validate() const {
  if (sm_count < 0 || tile_rows < 1 || tile_cols < 1)
    throw base::Error("expert GEMM model: sm_count >= 0 and tiles of at least 1 x 1 expected");
  if (!(group_efficiency > 0 && group_efficiency <= 2))
    throw base::Error("expert GEMM model: group_efficiency must be in (0, 2]");
  if (!(memory_saturation_sms >= 1) || !(kernel_launch_s >= 0))
    throw base::Error(
        "expert GEMM model: memory_saturation_sms >= 1 and kernel_launch_s >= 0 expected");
}

GemmChoice GemmChoiceFromString(const std::string& text) {
  if (text == "auto") return GemmChoice::kAuto;
  if (text == "group") return GemmChoice::kGroup;
  if (text == "dense") return GemmChoice::kDense;
  throw base::Error("--gemm " + text + ": expected auto, group or dense");
}

std::string ToString(GemmChoice choice) {
  switch (choice) {
    case GemmChoice::kAuto:
      return "auto";
    case GemmChoice::kGroup:
      return "group";
    case GemmChoice::kDense:
      return "dense";
  }
  return "?";
}

ExpertGemmModel::ExpertGemmModel(const model::CostSource& source, model::MoeModelSpec expert_model,
                                 ExpertGemmParameters params)
    : source_(source), expert_model_(std::move(expert_model)), params_(params) {
  params_.Validate();
  if (!expert_model_.moe) throw base::Error("expert GEMM model: the model has no routed experts");
  // Without its launch, which the overhead below pays once per call in either regime.
  one_row_s_ =
      std::max(0.0, source_.ExpertSeconds(expert_model_, 1, 0.0) - params_.kernel_launch_s);
  // Far past any ridge (a GEMM of 2^16 rows is compute-bound on every device we price).
  const int64_t large = int64_t{1} << 16;
  seconds_per_row_ = source_.ExpertSeconds(expert_model_, large, 0.0) / static_cast<double>(large);
}

int64_t ExpertGemmModel::Tiles(int64_t tokens) const {
  // The fused gate/up projection (twice the expert width for a gated activation) is the widest
  // of the expert's GEMMs, and the one EPS-MoE measured.
  const int64_t width = expert_model_.moe->expert_intermediate_size *
                        (expert_model_.activation == model::Activation::kSwiGlu ? 2 : 1);
  const int64_t row_tiles = (tokens + params_.tile_rows - 1) / params_.tile_rows;
  const int64_t col_tiles = (width + params_.tile_cols - 1) / params_.tile_cols;
  return row_tiles * col_tiles;
}

double ExpertGemmModel::OnSms(double full_device_s, double rows, double experts, int64_t tiles,
                              int64_t sms, double compute_efficiency) const {
  if (params_.sm_count > 0 && (sms < 1 || sms > params_.sm_count)) {
    throw base::Error("expert GEMM model: " + std::to_string(sms) + " SMs asked of a device with " +
                      std::to_string(params_.sm_count));
  }
  // The roofline's two terms of the full-device time: the arithmetic grows with the rows (the
  // source's seconds per row at a large load), the weight reads do not (its one-row time).
  const double arithmetic_s = std::min(full_device_s, rows * seconds_per_row_);
  const double weight_reads_s = std::min(full_device_s, experts * one_row_s_);
  // Persistent (stream-K) GEMMs balance the last wave, so the arithmetic pays for the SMs the
  // GEMM cannot fill (fewer tiles than SMs) and the SMs it was not given; the weight reads only
  // for too few busy SMs to saturate the memory. Without SMs (sm_count 0) neither applies.
  double compute_slowdown = 1, memory_slowdown = 1;
  if (params_.sm_count > 0) {
    const double busy = static_cast<double>(std::min(tiles, sms));
    compute_slowdown = static_cast<double>(params_.sm_count) / busy;
    memory_slowdown = 1.0 / std::min(1.0, busy / params_.memory_saturation_sms);
  }
  // The larger term decides, so the time is continuous and non-decreasing in the rows: a chunk
  // crossing the ridge keeps paying for the SMs lent to communication (before, a threshold at the
  // ridge switched that factor off, and Mixtral's prefill on 8xH800 "gained" 1.086 at N = 15).
  // What the two terms leave of the full-device time (the launch) is paid as is.
  const double overhead_s = std::max(0.0, full_device_s - std::max(arithmetic_s, weight_reads_s));
  return std::max(arithmetic_s / compute_efficiency * compute_slowdown,
                  weight_reads_s * memory_slowdown) +
         overhead_s;
}

double ExpertGemmModel::DenseSeconds(const std::vector<int64_t>& tokens_per_expert,
                                     int64_t sms) const {
  double seconds = 0;
  for (const int64_t tokens : tokens_per_expert) {
    seconds += OnSms(source_.ExpertSeconds(expert_model_, tokens, 0.0), static_cast<double>(tokens),
                     1.0, Tiles(tokens), sms, 1.0);
  }
  return seconds;
}

double ExpertGemmModel::GroupSeconds(const std::vector<int64_t>& tokens_per_expert,
                                     int64_t sms) const {
  if (tokens_per_expert.empty()) return 0.0;
  double full_device = 0, tokens = 0;
  int64_t tiles = 0;
  for (const int64_t expert_tokens : tokens_per_expert) {
    full_device += source_.ExpertSeconds(expert_model_, expert_tokens, 0.0);
    tiles += Tiles(expert_tokens);
    tokens += static_cast<double>(expert_tokens);
  }
  const double experts = static_cast<double>(tokens_per_expert.size());
  // One launch instead of one per expert; the arithmetic of a GroupGemm tile runs slower.
  full_device = std::max(0.0, full_device - (experts - 1) * params_.kernel_launch_s);
  return OnSms(full_device, tokens, experts, tiles, sms, params_.group_efficiency);
}

double ExpertGemmModel::Seconds(model::ExpertGemmKind kind,
                                const std::vector<int64_t>& tokens_per_expert, int64_t sms) const {
  return kind == model::ExpertGemmKind::kDenseGemm ? DenseSeconds(tokens_per_expert, sms)
                                                   : GroupSeconds(tokens_per_expert, sms);
}

std::optional<int64_t> ExpertGemmModel::CrossoverTokens(int64_t experts, int64_t sms,
                                                        int64_t max_tokens) const {
  if (experts < 1) throw base::Error("expert GEMM crossover: at least one expert expected");
  // With one expert per chunk both kernels are one dense GEMM in effect: DenseGemm from 1 token.
  if (experts == 1) return 1;
  for (double m = 1; m <= static_cast<double>(max_tokens); m = std::max(m + 1, m * 1.05)) {
    const std::vector<int64_t> load(static_cast<size_t>(experts), static_cast<int64_t>(m));
    if (DenseSeconds(load, sms) <= GroupSeconds(load, sms)) return static_cast<int64_t>(m);
  }
  return std::nullopt;
}

}  // namespace moelab::sim
