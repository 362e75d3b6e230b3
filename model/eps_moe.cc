#include "model/eps_moe.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace moelab::model {

void ExpertPipelineModel::Validate() const {
  if (!(communication_s >= 0 && computation_s >= 0 && overhead_per_pipeline_s >= 0 &&
        overhead_fixed_s >= 0)) {
    throw base::Error(
        "expert pipeline model: communication_s, computation_s and overheads must be >= 0");
  }
}

double ExpertPipelineModel::Time(int64_t pipelines) const {
  Validate();
  if (pipelines < 1)
    throw base::Error("pipeline count must be at least 1, got " + std::to_string(pipelines));
  const double n = static_cast<double>(pipelines);
  return std::max(communication_s, computation_s) + std::min(communication_s, computation_s) / n +
         overhead_per_pipeline_s * n + overhead_fixed_s;
}

double ExpertPipelineModel::ContinuousOptimum() const {
  Validate();
  if (overhead_per_pipeline_s <= 0) {
    throw base::Error(
        "expert pipeline model: overhead_per_pipeline_s (k) must be > 0 for an optimum");
  }
  return std::sqrt(std::min(communication_s, computation_s) / overhead_per_pipeline_s);
}

int64_t ExpertPipelineModel::OptimalPipelines() const {
  const double optimum = ContinuousOptimum();
  const int64_t low = std::max<int64_t>(1, static_cast<int64_t>(std::floor(optimum)));
  const int64_t high = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(optimum)));
  return Time(low) <= Time(high) ? low : high;
}

std::string ToString(ExpertGemmKind kind) {
  return kind == ExpertGemmKind::kGroupGemm ? "group_gemm" : "dense_gemm";
}

ExpertGemmKind ChooseExpertGemm(int64_t tokens, int64_t crossover_tokens) {
  if (tokens < 0) throw base::Error("token count must be >= 0, got " + std::to_string(tokens));
  if (crossover_tokens < 1) throw base::Error("GEMM crossover must be at least 1 token");
  return tokens < crossover_tokens ? ExpertGemmKind::kGroupGemm : ExpertGemmKind::kDenseGemm;
}

}  // namespace moelab::model
