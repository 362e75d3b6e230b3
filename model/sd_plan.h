#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/cost_source.h"
#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"

namespace moelab::model {

// Speculative-decoding plan from the analytic cost model (formulas.md section 1):
//   speedup = sigma (gamma + 1) T_T(B, 1) /
//             (T_D(B, 1) + (gamma - 1) T_D'(B, 1) + T_T(B, v) + T_reject + T_catch_up)
// (T_D': a draft pass right after another of the draft's, DraftFollowingStep)
//   target efficiency = T_T(B, 1) / T_T(B, v)
// where v, the positions the target verifies per sequence, is gamma + 1 by default (the last
// accepted token plus gamma drafts, as the executor runs it) or gamma (the paper's T_T(B, gamma)).
// T_catch_up = alpha^gamma (T_D(B, 2) - T_D(B, 1)): with gamma + 1 verification, a round that
// accepted every draft (probability alpha^gamma per sequence) also emits the target's bonus token,
// so the draft's first pass of the next round feeds two tokens for that sequence (the last draft,
// which the draft never cached, and the bonus token) -- what the executor does and validate
// replays. 0 with v = gamma (no bonus token) and when sigma is fixed instead of alpha (a sigma says
// nothing of how often every draft is accepted).

enum class VerifyPositions { kGammaPlusOne, kGamma };
std::string ToString(VerifyPositions positions);
VerifyPositions VerifyPositionsFromString(const std::string& name);  // "gamma+1" | "gamma"

struct SdPlanOptions {
  std::vector<int64_t> batches{1, 2, 4, 8, 16, 32, 64, 128, 256};
  std::vector<int64_t> gammas{1, 2, 3, 4, 5, 6, 7, 8};
  double alpha = 0.8;             // per-token acceptance rate, [0, 1)
  std::optional<double> sigma;    // when set, the accepted-length fraction for every gamma, (0, 1]
  int64_t context_length = 1024;  // tokens already in each sequence's KV cache
  VerifyPositions verify = VerifyPositions::kGammaPlusOne;

  void Validate() const;  // batches >= 1, gammas >= 1, alpha in [0, 1), context >= 0
};

struct SdPlanRow {
  int64_t batch = 0;
  int64_t gamma = 0;
  double alpha = 0;  // NaN when the sweep fixed sigma instead
  double sigma = 0;
  double speedup = 0;
  double target_efficiency = 0;
  double target_step_s = 0;  // T_T(B, 1): one autoregressive step
  double verify_s = 0;       // T_T(B, v)
  double draft_step_s = 0;   // T_D(B, 1): a round's first draft pass
  // T_D'(B, 1): its second and later passes, each right after another of the draft's (weights
  // partly still cached on a CPU; the same as draft_step_s for a source that does not tell them
  // apart). A round drafts draft_step_s + (gamma - 1) draft_following_step_s + catch_up_s.
  double draft_following_step_s = 0;
  double reject_s = 0;
  double catch_up_s = 0;   // expected extra draft time per round, T_catch_up above
  double draft_share = 0;  // of one SD round's time (catch-up included)
  double verify_share = 0;
  bool fits_memory = true;  // weights of both models + KV cache of the batch
};

// The best gamma of a batch among the rows that fit in memory; when none fits, the best of all,
// with fits_memory false (a batch that does not fit is never where SD "pays").
struct SdBestGamma {
  int64_t batch = 0;
  int64_t gamma = 0;
  double speedup = 0;
  bool fits_memory = true;
};

struct SdPlan {
  std::vector<SdPlanRow> rows;
  std::vector<SdBestGamma> best_gamma;
  // Smallest and largest batch whose best speedup exceeds 1 with both models and the batch's KV
  // cache in memory (absent when SD never pays).
  std::optional<std::pair<int64_t, int64_t>> pays_batch_range;
  std::string cost_source = "analytic-roofline";
  std::string device;
  std::string compute_dtype;
  std::string routing = "uniform";  // how the target's tokens were taken to route
};

// The times an SD round is made of, from one cost source (model/cost_source.h), at a fixed
// context. Memoized: same arguments, same result. Refuses a configuration whose weights do not fit
// one device of the source (naming the sizes).
class SdStepCosts {
 public:
  // `hardware_name` (the preset) makes the refusal suggest the node to choose instead.
  SdStepCosts(const CostSource& source, const MoeModelSpec& target, const MoeModelSpec& draft,
              int64_t context_length, const std::string& hardware_name = "");

  std::string source() const { return source_.name(); }
  std::string device() const { return source_.device(); }
  std::string compute_dtype() const { return source_.compute_dtype(); }
  // Price the target's passes with this routing (not owned; nullptr: uniform N(t)).
  void RouteTargetBy(const ExpertActivation* activation);
  std::string routing() const { return DescribeActivation(target_activation_); }
  double TargetStep(int64_t batch, int64_t positions);  // T_T(B, s), seconds
  double DraftStep(int64_t batch);                      // T_D(B, 1), a round's first pass
  // T_D'(B, 1): a draft pass right after another of the draft's (ForwardShape::after_own_pass).
  double DraftFollowingStep(int64_t batch);
  // A round's gamma draft passes: DraftStep + (gamma - 1) DraftFollowingStep.
  double DraftPasses(int64_t batch, int64_t gamma);
  // T_D(B, 2), logits for the last position: the first draft pass after a round that accepted
  // every draft feeds the last draft and the bonus token.
  double DraftCatchUpStep(int64_t batch);
  double Reject(int64_t batch, int64_t gamma);
  bool Fits(int64_t batch, int64_t gamma);  // weights + KV of both models

 private:
  const CostSource& source_;
  MoeModelSpec target_;  // copies: callers may pass temporaries
  MoeModelSpec draft_;
  int64_t context_length_;
  const ExpertActivation* target_activation_ = nullptr;
  double weights_per_device_ = 0;
  double capacity_per_device_ = 0;
  std::map<std::pair<int64_t, int64_t>, double> target_steps_;
  std::map<int64_t, double> draft_steps_;
  std::map<int64_t, double> draft_following_steps_;
  std::map<int64_t, double> draft_catch_up_steps_;
};

// The plan over options.batches x options.gammas from any cost source.
SdPlan PlanSpeculativeDecoding(SdStepCosts& costs, const SdPlanOptions& options);

}  // namespace moelab::model
