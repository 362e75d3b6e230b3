#pragma once

#include <cstdint>
#include <string>

namespace moelab::model {

// EPS-MoE's pipeline and kernel-choice formulas (formulas.md section 5).

// Time of an MoE layer split into `pipelines` chunks whose communication and computation overlap:
//   T(N) = max(T_comm, T_comp) + min(T_comm, T_comp) / N + k * N + b,
// the overlap hiding all but one chunk of the shorter phase, at an overhead R(N) = k*N + b.
struct ExpertPipelineModel {
  double communication_s = 0;
  double computation_s = 0;
  double overhead_per_pipeline_s = 0;  // k
  double overhead_fixed_s = 0;         // b

  double Time(int64_t pipelines) const;
  // Continuous optimum N* = sqrt(C / k), C = min(T_comm, T_comp).
  double ContinuousOptimum() const;
  // The integer N >= 1 minimizing Time (checks floor and ceil of N*). k = 0 has no optimum:
  // refused, since any N would be "optimal" only by ignoring the overhead.
  int64_t OptimalPipelines() const;
  void Validate() const;
};

enum class ExpertGemmKind { kGroupGemm, kDenseGemm };
std::string ToString(ExpertGemmKind kind);

// GroupGemm below the crossover token count, DenseGemm at or above it. EPS-MoE measured GroupGemm
// ahead below 2048 tokens and DenseGemm ahead from 4096 (16 experts, [1536, 5120] weights); the
// default crossover is their geometric midpoint, 2896, a stated assumption (docs/model.md).
inline constexpr int64_t kDefaultGemmCrossoverTokens = 2896;
ExpertGemmKind ChooseExpertGemm(int64_t tokens,
                                int64_t crossover_tokens = kDefaultGemmCrossoverTokens);

}  // namespace moelab::model
