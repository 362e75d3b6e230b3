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
  if (!(memory_saturation_sms >= 1) || !(kernel_launch_s >= 0) || !(ridge_tokens >= 0))
    throw base::Error(
        "expert GEMM model: memory_saturation_sms >= 1, kernel_launch_s >= 0 and ridge_tokens >= 0 "
        "expected");
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

double ExpertGemmModel::OccupancyFactor(int64_t tiles, double tokens_per_expert,
                                        int64_t sms) const {
  if (params_.sm_count == 0) return 1.0;
  if (sms < 1 || sms > params_.sm_count) {
    throw base::Error("expert GEMM model: " + std::to_string(sms) + " SMs asked of a device with " +
                      std::to_string(params_.sm_count));
  }
  const double total = static_cast<double>(params_.sm_count);
  if (tokens_per_expert >= params_.ridge_tokens) {
    // Persistent (stream-K) GEMMs balance the last wave, so what costs is the SMs the GEMM cannot
    // fill (fewer tiles than SMs) and the SMs it was not given.
    return total / static_cast<double>(std::min(tiles, sms));
  }
  const double busy = static_cast<double>(std::min(tiles, sms));
  return 1.0 / std::min(1.0, busy / params_.memory_saturation_sms);
}

double ExpertGemmModel::DenseSeconds(const std::vector<int64_t>& tokens_per_expert,
                                     int64_t sms) const {
  double seconds = 0;
  for (const int64_t tokens : tokens_per_expert) {
    seconds += source_.ExpertSeconds(expert_model_, tokens, 0.0) *
               OccupancyFactor(Tiles(tokens), static_cast<double>(tokens), sms);
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
  const double mean_tokens = tokens / experts;
  // One launch instead of one per expert; a compute-bound tile runs slower in a GroupGemm.
  full_device = std::max(0.0, full_device - (experts - 1) * params_.kernel_launch_s);
  const double efficiency = mean_tokens >= params_.ridge_tokens ? params_.group_efficiency : 1.0;
  return full_device * OccupancyFactor(tiles, mean_tokens, sms) / efficiency;
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
