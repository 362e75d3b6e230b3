#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/executor_shape.h"
#include "model/preset_store.h"
#include "parallel/communicator.h"

namespace moelab::validate {

// `mpirun -n R moelab validate --cases ep`: sim ep's prediction of an expert-parallel step on this
// machine's R ranks against `moelab run --expert-parallel R --ep-chunks N` measured here.
//
// 1. Profile (unless `profile` is given): the operators on every rank at once at `threads` threads
//    (what each rank computes with), rank 0's kept, and the collectives on the R ranks
//    (profiler/collective_profile.h), the quick grid with `quick`; fitted by fit latency's forms.
//    The case rounds (3.) run between the profile's rounds (CaseRoundsBy), so both are taken over
//    the same stretch of this machine's moving speed; with a reused `profile` they run after it.
// 2. Predict: sim::SimulateEp of the profiled shape, EP = R with `attention` (data-parallel, or
//    tensor-parallel: heads split over the ranks, a reduce-scatter and an all-gather of the hidden
//    states a layer, as run --attention tensor-parallel runs it), each case's
//    batch and tokens at N chunks, every operator priced by the fitted-profile source, the
//    collectives by the fitted-collectives curves (the R ranks' own); the step's time.
// 3. Measure: executor::RunExpertParallel of the same model, seeded, at N chunks, `repeat` rounds
//    with the cases interleaved round by round (odd rounds in reverse order); a decode run's step
//    is the median of its decode steps, a prefill's its one pass (prefills run 3 times a round,
//    validate's RunsPerRound), and a case's measurement the median over its runs (each step the
//    slowest rank's).
// Cases: decode and prefill, N in `chunks` each; judged on the step time per layer (the step over
// the model's layers: the same relative error as the step's), |predicted - measured| / measured;
// per workload the N with the lowest predicted and measured step.
struct EpValidationRequest {
  std::string model = "mixtral-8x7b";
  model::ShapeOverrides shape = model::DefaultTargetShape();
  bool quick = false;
  int repeat = 3;
  std::optional<std::filesystem::path> profile;  // reuse: it must have collectives on R ranks
  std::vector<int64_t> chunks = {1, 2, 4};
  uint64_t seed = 1;
  int threads = 1;  // each rank's thread pool (the ranks share this machine's cores)
  std::string attention = "data-parallel";  // or "tensor-parallel": --attention, in run and sim
  // The operator profile rank 0 takes beside the collectives (profiler::ProfileRequest's): the
  // cache its weights are cycled against (unset: the reported L3) and its rounds (0: the grid's).
  std::optional<int64_t> cache_bytes;
  int profile_rounds = 0;
  std::ostream* progress = nullptr;

  void Validate() const;  // errors name the option
};

// A step per layer in the terms sim ep prices it by (seconds), so a miss can be traced to one:
//   attention_s: attention with the router, per layer (measured: the slowest rank's);
//   expert_compute_s: a rank's expert FFNs, per MoE layer (measured: the busiest rank's over the
//     run, which the layers' varying busiest ranks bring near the mean; predicted: a rank of mean
//     load's, sim ep's mean_rank_compute_s);
//   exposed_comm_s: per MoE layer, the time the least-waiting rank was blocked on the exchanges
//     (predicted: the exchanges' exposed time plus the busiest rank's lead over a rank of mean
//     load, sim ep's expert_compute_s - mean_rank_compute_s, which the others wait for);
//   block_other_s: per MoE layer, the rest of the MoE block on the busiest rank's compute thread
//     (planning, packing rows, starting the exchanges, the weighted combine: run's other_s);
//     predicted sim ep's pack_combine_s, the packing and combining copies at the profiled host
//     memcpy's rate;
//   rest_s: the step per layer less those four (LM head, embedding, norms, dense layers).
struct EpStepTerms {
  double attention_s = 0, expert_compute_s = 0, exposed_comm_s = 0, block_other_s = 0, rest_s = 0;
};

struct EpValidationCase {
  std::string workload;  // "decode" | "prefill"
  int64_t batch = 0;     // sequences over all ranks
  int64_t prompt = 0;
  int64_t output_tokens = 0;
  int64_t chunks = 1;
  double predicted_step_s = 0;
  std::vector<double> runs_step_s;  // each run's step
  double measured_step_s = 0;       // median of runs_step_s
  int64_t layers = 1;
  double predicted_exposed_comm_s = 0;  // sim ep's, per MoE layer of one step
  EpStepTerms predicted_terms;
  std::vector<EpStepTerms> runs_terms;  // each run's, as its step (the median of its steps)
  EpStepTerms measured_terms;           // each term's median over the runs

  double error() const { return (predicted_step_s - measured_step_s) / measured_step_s; }
};

struct EpBestChunks {
  std::string workload;
  int64_t predicted = 0, measured = 0;
  // The predicted N's measured step over the measured best's, less 1 (0 when right).
  double regret = 0;
  // Paired runs (the i-th run of each ran in the same round): in how many of `pairs` the measured
  // best was the faster, and the two-sided sign test's p of that count if the two N were equally
  // fast. A wrong N with a large p is a difference this machine's noise does not resolve.
  int64_t best_faster = 0, pairs = 0;
  double sign_test_p = 1;
  bool right() const { return predicted == measured; }
};

struct EpValidationResult {
  int ranks = 0;
  std::string model;
  std::string attention;
  std::vector<EpValidationCase> cases;
  std::vector<EpBestChunks> best_chunks;
  double median_abs_error = 0, max_abs_error = 0;
  nlohmann::json profile, fit;       // what priced the predictions
  bool profile_interleaved = false;  // the case rounds ran between the profile's rounds
  nlohmann::json collective_cost;
  std::vector<std::string> notes;
  double load_average_1m_start = -1, load_average_1m_end = -1;
};

// Collective: every rank calls it with the same request. Rank 0's result is complete; the others
// return theirs without profile or fit. Errors every rank raises alike are parallel::AgreedError.
EpValidationResult RunEpValidation(const EpValidationRequest& request,
                                   const model::PresetStore& presets,
                                   parallel::Communicator& communicator);

// "moelab.validation_ep/1" (without provenance), and the text summary.
nlohmann::json EpValidationToJson(const EpValidationResult& result);
std::string EpValidationText(const EpValidationResult& result);

}  // namespace moelab::validate
