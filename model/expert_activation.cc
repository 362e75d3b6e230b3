#include "model/expert_activation.h"

#include "base/error.h"
#include "model/forward_cost.h"
#include "model/moe_math.h"

namespace moelab {

std::string ToString(PassKind kind) {
  switch (kind) {
    case PassKind::kPrefill: return "prefill";
    case PassKind::kDecode: return "decode";
    case PassKind::kVerify: return "verify";
  }
  return "?";
}

PassKind PassKindOf(const ForwardShape& shape) {
  if (shape.tokens_per_sequence == 1) return PassKind::kDecode;
  return shape.context_length == 0 ? PassKind::kPrefill : PassKind::kVerify;
}

UniformExpertActivation::UniformExpertActivation(int64_t num_experts, int64_t top_k)
    : num_experts_(num_experts), top_k_(top_k) {
  if (top_k < 1 || top_k > num_experts) {
    throw Error("uniform routing needs 1 <= top_k <= experts, got top_k " + std::to_string(top_k) + " of " +
                std::to_string(num_experts) + " experts");
  }
}

double UniformExpertActivation::DistinctExperts(int64_t batch, int64_t tokens_per_sequence, PassKind) const {
  return ExpectedActivatedExperts(static_cast<double>(batch) * static_cast<double>(tokens_per_sequence), num_experts_,
                                  top_k_);
}

double ActivatedExpertsPerLayer(const MoeSpec& moe, const ForwardShape& shape) {
  const double tokens = static_cast<double>(shape.batch) * static_cast<double>(shape.tokens_per_sequence);
  if (shape.activation == nullptr) return ExpectedActivatedExperts(tokens, moe.num_experts, moe.top_k);
  const ExpertActivation& activation = *shape.activation;
  if (activation.num_experts() != moe.num_experts || activation.top_k() != moe.top_k) {
    throw Error("routing " + activation.Describe() + " was recorded on a gate of " +
                std::to_string(activation.num_experts()) + " experts, top-" + std::to_string(activation.top_k()) +
                "; the model has " + std::to_string(moe.num_experts) + " experts, top-" + std::to_string(moe.top_k));
  }
  return activation.DistinctExperts(shape.batch, shape.tokens_per_sequence, PassKindOf(shape));
}

std::string DescribeActivation(const ExpertActivation* activation) {
  return activation ? activation->Describe() : "uniform";
}

}  // namespace moelab
