#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"

namespace moelab::model {

struct ForwardShape;

// What a forward pass is, for routing: the tokens of one sequence in a pass are a prompt
// (prefill), one new token (decode) or the last accepted token plus the drafts (an SD verify
// pass, or any multi-token step on a filled cache). Their routing differs: drafted tokens of one
// sequence often route alike, a prompt's tokens do not.
enum class PassKind { kPrefill, kDecode, kVerify };
std::string ToString(PassKind kind);
PassKind PassKindOf(const ForwardShape& shape);

// How the routed tokens of one pass spread over a MoE layer's experts: experts[i] is the mean
// number of experts (per layer) that receive exactly first_tokens + i tokens. Its sum is the
// distinct experts N; sum (first_tokens + i) experts[i] is the pass's tokens x K. A cost that is
// not linear in an expert's tokens (kernels change regime at tile boundaries) is priced over this
// spread, not at the mean B K / N: E[sum_e f(t_e)] != N f(mean) (Jensen).
struct ExpertLoad {
  int64_t first_tokens = 1;
  std::vector<double> experts;
};

// How many distinct routed experts a MoE layer runs in one pass: the term that prices routed
// experts (their weights are read once per activated expert). Uniform routing gives the closed
// form N(t) = E (1 - ((E - K) / E)^t) (formulas.md); measured or synthetic routing (a trace, a
// popularity table, correlated routing: routing/expert_activation_sampler.h) gives fewer when
// tokens share experts. Every cost source takes it from ForwardShape::activation.
class ExpertActivation {
 public:
  virtual ~ExpertActivation() = default;
  // What a report says the prediction assumed: "uniform", "trace:FILE", ...
  virtual std::string Describe() const = 0;
  virtual int64_t num_experts() const = 0;
  virtual int64_t top_k() const = 0;
  // Mean over MoE layers of the distinct experts `batch` sequences of `tokens_per_sequence`
  // tokens each activate in one pass of `kind`.
  virtual double DistinctExperts(int64_t batch, int64_t tokens_per_sequence,
                                 PassKind kind) const = 0;
  // The same pass's tokens-per-expert spread (the distinct experts are its sum).
  virtual ExpertLoad Load(int64_t batch, int64_t tokens_per_sequence, PassKind kind) const = 0;
};

// Uniform routing's closed form (independent of the pass kind).
class UniformExpertActivation : public ExpertActivation {
 public:
  UniformExpertActivation(int64_t num_experts, int64_t top_k);  // Error unless 1 <= K <= E
  std::string Describe() const override { return "uniform"; }
  int64_t num_experts() const override { return num_experts_; }
  int64_t top_k() const override { return top_k_; }
  double DistinctExperts(int64_t batch, int64_t tokens_per_sequence, PassKind kind) const override;
  // Each expert's tokens are Binomial(B L, K / E) (a token picks K of E experts uniformly, tokens
  // independently); the terms beyond 12 standard deviations of the mean (< 1e-30) are left out.
  ExpertLoad Load(int64_t batch, int64_t tokens_per_sequence, PassKind kind) const override;

 private:
  int64_t num_experts_, top_k_;
};

// The activated experts per MoE layer of `moe` in a pass of `shape`: shape.activation's, or the
// uniform closed form when it has none. Error when the activation was measured on a gate of
// another E or K (naming both).
double ActivatedExpertsPerLayer(const MoeSpec& moe, const ForwardShape& shape);
// The tokens-per-expert spread of `moe` in a pass of `shape` (uniform's when it has no
// activation); the same check.
ExpertLoad ExpertLoadPerLayer(const MoeSpec& moe, const ForwardShape& shape);

// The activation a report names: shape's, or "uniform".
std::string DescribeActivation(const ExpertActivation* activation);

}  // namespace moelab::model
