#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "executor/forward_model.h"
#include "executor/generation.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "model/model_spec.h"
#include "routing/routing_trace.h"
#include "validate/operator_breakdown.h"
#include "validate/validation_case.h"

namespace moelab::validate {

// What one run of a case measured.
struct CaseRun {
  double value = 0;  // the case's quantity (QuantityOf): seconds, or the SD speedup
  // decode and prefill: the executor's operator times of what `value` measures (the prefill; one
  // decode step, the mean over the run's steps); sd: of one full-batch verify pass (the mean over
  // the run's), the step an SD prediction most often misses; empty otherwise.
  OperatorSeconds operators;
  // The timed steps whose sum `value` is made of, in order (prefill: the prefill; decode and beam:
  // the decode steps; sd: the SD run's draft and verify steps), and for sd the plain decode's
  // steps. Seeded runs of a case repeat the same steps, so repeats can be compared step by step.
  std::vector<double> steps_s;
  std::vector<double> baseline_steps_s;
  double sigma = 0;              // sd: accepted-length fraction the run realized (MoESD's sigma)
  double target_efficiency = 0;  // sd: mean plain decode step / mean full-batch verify pass
  // sd: how many sequences each round carried (sequences that have all their tokens leave the
  // batch, so the last rounds are smaller: what the prediction replays), the plain decode's step
  // count, and the mean full-batch step times (plain decode, one draft forward, one verify pass).
  std::vector<int64_t> sequences_per_round;
  // sd: per round, the sequences whose first draft pass fed two tokens (the previous round
  // accepted all gamma drafts, so the last draft and the bonus token were pending).
  std::vector<int64_t> catch_up_per_round;
  int64_t plain_decode_steps = 0;
  double plain_step_s = 0;
  double draft_step_s = 0;
  double verify_step_s = 0;
};

// The executor `moelab run` runs, with the target (default and held-out shapes) and the draft
// loaded once so the cases can be interleaved round after round without rebuilding weights.
class ExecutorBench {
 public:
  // Synthetic weights (seeded) for `target` (and a copy with `held_out_layers` layers when > 0)
  // and the dense `draft`, on `threads` threads (0: all cores); the models run on `device`: "cpu"
  // or "gpu" (GPU 0 through the executor's CUDA backend, which copies the weights to the device).
  ExecutorBench(const executor::ExecutorConfig& target, int64_t held_out_layers,
                const executor::ExecutorConfig& draft, uint64_t seed, int threads, double alpha,
                const std::string& device = "cpu");

  const executor::ExecutorConfig& target_config(bool held_out) const;
  const executor::ExecutorConfig& draft_config() const { return draft_weights_.config; }
  int threads() const { return pool_.size(); }
  kernels::ThreadPool& pool() { return pool_; }

  CaseRun Run(const ValidationCase& spec);

  // The target's own gate routing over a short SD run at `gamma` and a plain decode, both of
  // `sequences` different prompts: what predictions with the executor's routing use
  // (SampledExpertActivation draws a pass's sequences from the recorded ones).
  routing::RoutingTrace RecordRouting(bool held_out, int64_t gamma, int64_t sequences);
  // What a user has before trying SD: a plain decode's routing, recorded in a run of its own
  // (other prompts than RecordRouting's), `sequences` sequences of `output_tokens` tokens.
  routing::RoutingTrace RecordDecodeRouting(bool held_out, int64_t sequences,
                                            int64_t output_tokens);

 private:
  executor::ForwardModel& Target(bool held_out);
  const std::vector<executor::TokenIds>& Continuation(
      const ValidationCase& spec, const std::vector<executor::TokenIds>& prompts);

  kernels::ThreadPool pool_;
  uint64_t seed_;
  double alpha_;
  executor::ModelWeights target_weights_;
  std::unique_ptr<executor::ModelWeights> held_out_weights_;
  executor::ModelWeights draft_weights_;
  std::unique_ptr<executor::ForwardModel> target_, held_out_, draft_;
  // (held-out shape, batch, prompt, context) -> the target's greedy continuation of the prompts.
  std::map<std::tuple<bool, int64_t, int64_t, int64_t>, std::vector<executor::TokenIds>>
      continuations_;
};

}  // namespace moelab::validate
