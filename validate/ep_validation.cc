#include "validate/ep_validation.h"

#include <functional>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/stats.h"
#include "executor/expert_parallel_run.h"
#include "fit/collective_cost_source.h"
#include "fit/cost_source_options.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "profiler/collective_profile.h"
#include "profiler/machine_info.h"
#include "profiler/profile_grid.h"
#include "profiler/profiler.h"
#include "sim/ep_simulator.h"
#include "validate/run_validation.h"

namespace moelab::validate {
namespace {

// The held-out cases: batches and prompts that are no profile grid point as such. A decode holds 4
// sequences a rank or more: sim ep splits a device's active experts into the chunks, and with
// fewer tokens fewer than 4 of an 8-expert, top-2 model's 4 local experts are active (N = 4 would
// then be no split of them).
std::vector<EpValidationCase> PlanCases(const EpValidationRequest& request, int ranks) {
  struct Shape {
    const char* workload;
    int64_t batch_per_rank, prompt, output_tokens;
  };
  const std::vector<Shape> shapes =
      request.quick ? std::vector<Shape>{{"decode", 4, 24, 9}, {"prefill", 1, 96, 1}}
                    : std::vector<Shape>{{"decode", 4, 24, 17},
                                         {"decode", 8, 48, 17},
                                         {"prefill", 1, 96, 1},
                                         {"prefill", 2, 160, 1}};
  std::vector<EpValidationCase> cases;
  for (const Shape& shape : shapes) {
    for (const int64_t chunks : request.chunks) {
      EpValidationCase c;
      c.workload = shape.workload;
      c.batch = shape.batch_per_rank * ranks;
      c.prompt = shape.prompt;
      c.output_tokens = shape.output_tokens;
      c.chunks = chunks;
      cases.push_back(c);
    }
  }
  return cases;
}

// Rank 0's profile measured now on every rank (collective), `after_round` run by every rank after
// each of its operator rounds.
nlohmann::json ProfileNow(const EpValidationRequest& request, const model::PresetStore& presets,
                          parallel::Communicator& communicator,
                          std::function<void(int round, int rounds)> after_round) {
  profiler::ProfileRequest profile;
  profile.after_round = std::move(after_round);
  profile.model = request.model;
  profile.shape = request.shape;
  profile.quick = request.quick;
  profile.threads = request.threads;
  profile.use_gpu = false;
  profile.seed = request.seed;
  profile.cache_bytes = request.cache_bytes;
  if (request.profile_rounds > 0) {
    profile.grid = request.quick ? profiler::GridSpec::Quick() : profiler::GridSpec::Full();
    profile.grid->repetitions = request.profile_rounds;
  }
  profile.progress = communicator.rank() == 0 ? request.progress : nullptr;
  return profiler::RunCollectiveProfile(
      profile,
      request.quick ? profiler::CollectiveGridSpec::Quick() : profiler::CollectiveGridSpec::Full(),
      presets, communicator);
}

// The host memcpy's rate (the profile's memcpy_host curve) at one MoE layer's rows of a case on
// one rank, fp32 as the executor copies them; 0 when the profile has no such curve (older
// profiles: the row copies then go unpriced, and sim ep's row_copies_from says so).
double HostCopyBytesPerS(const fit::LatencyFit& fit, const EpValidationCase& c, int ranks,
                         const model::MoeModelSpec& target) {
  for (const fit::OperatorCurve& curve : fit.operators) {
    if (curve.op != "memcpy_host" || curve.device != "cpu" || curve.variable != "bytes") continue;
    const double tokens =
        static_cast<double>(c.batch / ranks) * (c.workload == "decode" ? 1.0 : c.prompt);
    const double bytes = tokens * static_cast<double>(target.moe->top_k) *
                         static_cast<double>(target.hidden_size) * sizeof(float);
    const double seconds = curve.Predict(bytes);
    return seconds > 0 ? bytes / seconds : 0.0;
  }
  return 0.0;
}

// Rank 0: every case's predicted step from the profile's fitted curves.
void Predict(const EpValidationRequest& request, const model::PresetStore& presets, int ranks,
             EpValidationResult& result) {
  const std::string origin =
      request.profile ? request.profile->string() : std::string("the profile taken now");
  const fit::LatencyFit fit = fit::FitLatency(fit::ProfileFromJson(result.profile, origin), {});
  if (!fit::HasCollectiveCurves(fit)) {
    throw base::Error(origin +
                      ": no all_to_all and all_reduce curves: validate --cases ep needs "
                      "the collectives measured on these ranks (mpirun -n " +
                      std::to_string(ranks) + " moelab profile --collectives)");
  }
  const model::MoeModelSpec target = fit.model.ExecutorSpec(presets.LoadModel(request.model));
  const auto compute = fit::CostSources::FittedSource(fit, target, "cpu");
  const fit::FittedCollectiveCost collectives(fit.operators, origin);
  result.collective_cost = collectives.Describe();
  result.fit = {{"operators", fit.operators.size()}, {"skipped", fit.skipped.size()}};
  for (EpValidationCase& c : result.cases) {
    sim::EpConfig config;
    config.model = target;
    // Only the node's size matters here: compute and collectives are this machine's, measured.
    config.node = presets.LoadHardware(std::to_string(ranks) + "xh800");
    config.compute_on_node = false;
    config.ep = ranks;
    config.attention = sim::EpAttentionFromString(request.attention);
    config.workload = c.workload == "decode" ? sim::EpWorkload::kDecode : sim::EpWorkload::kPrefill;
    config.batch = c.batch;
    // A decode step is priced at the steps' mean context: steps k = 1 .. output - 1 each see
    // prompt + k - 1 cached positions.
    config.tokens = c.workload == "decode" ? c.prompt + (c.output_tokens - 2) / 2 : c.prompt;
    config.chunks = c.chunks;
    // The executor sends fp32 rows (and a float naming the expert: 1 / hidden more).
    config.comm_bits = 32;
    // The executor runs each local expert's FFN in turn on its CPU threads: DenseGemm, no launch.
    config.gemm = sim::GemmChoice::kDense;
    config.kernel_launch_s = 0;
    // The MoE block's row copies at the profiled host memcpy's rate at a layer's bytes.
    config.copy_bytes_per_s = HostCopyBytesPerS(fit, c, ranks, target);
    // The executor's ranks are CPU processes whose threads all compute: their exchanges move
    // only inside MPI's calls, between the chunks' GEMMs.
    config.communication_overlaps_compute = false;
    const sim::EpResult simulated = sim::SimulateEp(config, *compute, collectives);
    c.predicted_step_s = simulated.chosen.step_s;
    c.predicted_exposed_comm_s = simulated.chosen.exposed_comm_s;
    c.layers = target.num_layers;
    EpStepTerms& terms = c.predicted_terms;
    terms.attention_s = simulated.attention_s;
    // A rank's own expert compute, and its wait: the exchanges' exposed time and the busiest
    // rank's lead over a rank of mean load (what a measured rank's own clocks split the step into).
    terms.expert_compute_s = simulated.chosen.mean_rank_compute_s;
    terms.exposed_comm_s = simulated.chosen.exposed_comm_s + simulated.chosen.expert_compute_s -
                           simulated.chosen.mean_rank_compute_s;
    // Packing and combining the rows: what the run's block other work times (its gathering and
    // scattering are inside its expert compute, as sim ep's are).
    terms.block_other_s = simulated.chosen.pack_combine_s;
    terms.rest_s = simulated.chosen.step_s / static_cast<double>(target.num_layers) -
                   terms.attention_s - terms.expert_compute_s - terms.exposed_comm_s -
                   terms.block_other_s;
  }
}

struct MeasuredRun {
  double step_s = 0;  // the median of the run's steps of the case's kind (each the slowest rank's)
  EpStepTerms terms;
};

// The run's terms per layer of one step of `kind` (EpStepTerms), from every rank's times.
EpStepTerms TermsOf(const executor::RunResult& measured, const std::string& kind,
                    double mean_step_s, parallel::Communicator& communicator) {
  const executor::ExecutorConfig& config = measured.model.config;
  const double layers = static_cast<double>(config.num_layers);
  const double moe_layers = static_cast<double>(config.num_layers - config.first_dense_layers);
  double passes = 0;
  for (const executor::StepTime& step : measured.step_times) passes += step.kind == kind;
  const auto operators = measured.operator_times_by_step_kind.find(kind);
  const auto& by_kind = measured.expert_parallel->by_step_kind;
  const auto moe = by_kind.find(kind);
  if (operators == measured.operator_times_by_step_kind.end() || moe == by_kind.end())
    throw base::Error("validate --cases ep: a run of " + kind + " timed no " + kind + " pass");
  // Maxima over the ranks; the exposed communication's minimum as the maximum of its negative.
  double values[4] = {
      (operators->second.attention_s + operators->second.router_s) / passes / layers,
      moe->second.expert_compute_s / passes / moe_layers,
      -moe->second.exposed_comm_s / passes / moe_layers, moe->second.other_s / passes / moe_layers};
  communicator.AllReduceMax(values, 4);
  EpStepTerms terms;
  terms.attention_s = values[0];
  terms.expert_compute_s = values[1];
  terms.exposed_comm_s = -values[2];
  terms.block_other_s = values[3];
  terms.rest_s = mean_step_s / layers - terms.attention_s - terms.expert_compute_s -
                 terms.exposed_comm_s - terms.block_other_s;
  return terms;
}

// A case's run on `ranks` ranks, as `mpirun -n R moelab run --expert-parallel R` takes it.
std::pair<executor::RunRequest, executor::ExpertParallelOptions> CaseRun(
    const EpValidationRequest& request, const EpValidationCase& c, int ranks) {
  executor::RunRequest run;
  run.model = request.model;
  run.shape = request.shape;
  run.workload =
      c.workload == "decode" ? executor::Workload::kDecode : executor::Workload::kPrefill;
  run.batch = c.batch;
  run.prompt_tokens = c.prompt;
  run.output_tokens = c.output_tokens;
  run.seed = request.seed;
  run.threads = request.threads;
  executor::ExpertParallelOptions options;
  options.ranks = ranks;
  options.chunks = std::to_string(c.chunks);
  options.attention = request.attention;
  options.warm_up_prefill = true;  // the profile times warm operators (expert_parallel_run.h)
  return {run, options};
}

// One run of a case on every rank: its step and the step's terms.
MeasuredRun MeasureOnce(const EpValidationRequest& request, const EpValidationCase& c,
                        const model::PresetStore& presets, parallel::Communicator& communicator) {
  const auto [run, options] = CaseRun(request, c, communicator.size());
  const executor::RunResult measured =
      executor::RunExpertParallel(run, options, presets, communicator);
  std::vector<double> steps;
  for (const executor::StepTime& step : measured.step_times) {
    if (step.kind == c.workload) steps.push_back(step.seconds);
  }
  if (steps.empty())
    throw base::Error("validate --cases ep: a run of " + c.workload + " timed no step");
  double sum_s = 0;
  for (double s : steps) sum_s += s;
  const double mean_step_s = sum_s / static_cast<double>(steps.size());
  return {base::Median(steps), TermsOf(measured, c.workload, mean_step_s, communicator)};
}

// Each term's median over a case's runs.
EpStepTerms MedianTerms(const std::vector<EpStepTerms>& runs) {
  const auto median = [&](double EpStepTerms::*term) {
    std::vector<double> values;
    for (const EpStepTerms& r : runs) values.push_back(r.*term);
    return base::Median(values);
  };
  return {median(&EpStepTerms::attention_s), median(&EpStepTerms::expert_compute_s),
          median(&EpStepTerms::exposed_comm_s), median(&EpStepTerms::block_other_s),
          median(&EpStepTerms::rest_s)};
}

// Per workload, the N of the lowest predicted and of the lowest measured step (ties: fewer).
std::vector<EpBestChunks> BestChunks(const std::vector<EpValidationCase>& cases) {
  std::vector<EpBestChunks> best;
  for (const char* workload : {"decode", "prefill"}) {
    const EpValidationCase* predicted = nullptr;
    const EpValidationCase* measured = nullptr;
    for (const EpValidationCase& c : cases) {
      if (c.workload != workload) continue;
      if (!predicted || c.predicted_step_s < predicted->predicted_step_s) predicted = &c;
      if (!measured || c.measured_step_s < measured->measured_step_s) measured = &c;
    }
    if (!predicted) continue;
    EpBestChunks b;
    b.workload = workload;
    b.predicted = predicted->chunks;
    b.measured = measured->chunks;
    b.regret = predicted->measured_step_s / measured->measured_step_s - 1;
    const size_t pairs = std::min(predicted->runs_step_s.size(), measured->runs_step_s.size());
    for (size_t i = 0; i < pairs && b.predicted != b.measured; ++i) {
      const double best_s = measured->runs_step_s[i], predicted_s = predicted->runs_step_s[i];
      if (best_s == predicted_s) continue;
      ++b.pairs;
      b.best_faster += best_s < predicted_s;
    }
    b.sign_test_p = base::SignTestP(b.best_faster, b.pairs);
    best.push_back(b);
  }
  return best;
}

// Rank 0's failure, told to every rank so none waits for it in a collective.
void Agree(parallel::Communicator& communicator, const std::string& error) {
  for (const std::string& message : communicator.AllGatherBytes(error)) {
    if (!message.empty()) throw parallel::AgreedError(message);
  }
}

// Round `round` of every case (odd rounds in reverse order: a drift over the minutes of a round,
// the same order every round, put N = 4 last each time and read as a cost of chunking).
void RunCaseRound(const EpValidationRequest& request, const model::PresetStore& presets,
                  parallel::Communicator& communicator, int round,
                  std::vector<EpValidationCase>& cases) {
  for (size_t i = 0; i < cases.size(); ++i) {
    EpValidationCase& c = cases[round % 2 == 0 ? i : cases.size() - 1 - i];
    const int runs = c.workload == "prefill" ? 3 : 1;  // a burst decides a one-pass run whole
    for (int run = 0; run < runs; ++run) {
      const MeasuredRun measured = MeasureOnce(request, c, presets, communicator);
      c.runs_step_s.push_back(measured.step_s);
      c.runs_terms.push_back(measured.terms);
    }
  }
  if (request.progress && communicator.rank() == 0)
    *request.progress << "validate --cases ep: case round " << round + 1 << "/" << request.repeat
                      << " done\n";
}

}  // namespace

void EpValidationRequest::Validate() const {
  if (repeat < 1) throw base::Error("--repeat " + std::to_string(repeat) + ": must be at least 1");
  if (threads < 1) throw base::Error("--threads: at least 1 per rank with --cases ep");
  if (chunks.empty()) throw base::Error("validate --cases ep: no chunk counts to compare");
  if (attention != "data-parallel" && attention != "tensor-parallel") {
    throw base::Error("--attention must be data-parallel or tensor-parallel, got '" + attention +
                      "'");
  }
  if (cache_bytes) profiler::CheckCacheBytesOption(*cache_bytes);
  if (profile_rounds < 0 || profile_rounds > 100) {
    throw base::Error("--profile-rounds " + std::to_string(profile_rounds) +
                      ": expected 1 to 100 rounds of the profile grid");
  }
  if (profile && (cache_bytes || profile_rounds > 0)) {
    throw base::Error(std::string(cache_bytes ? "--cache-bytes" : "--profile-rounds") +
                      " sets the profile validate takes; with --profile it takes none");
  }
}

EpValidationResult RunEpValidation(const EpValidationRequest& request,
                                   const model::PresetStore& presets,
                                   parallel::Communicator& communicator) {
  EpValidationResult result;
  result.ranks = communicator.size();
  result.model = request.model;
  result.attention = request.attention;
  result.load_average_1m_start = profiler::LoadAverage1m();
  // Every rank's refusal agreed before any collective: a refusal on one rank alone (its own model
  // file missing) left the others in the profile's first exchange, the job hung.
  std::string refusal;
  try {
    request.Validate();
    if (communicator.size() < 2)
      throw base::Error("validate --cases ep: run it under mpirun -n 2 (or more ranks)");
    presets.LoadModel(request.model);  // a missing or bad --model is said as validate's
    result.cases = PlanCases(request, communicator.size());
    // What each case's run would refuse (ranks that do not divide the experts, KV heads that do
    // not divide by the ranks), said now rather than after minutes of profiling.
    for (const EpValidationCase& c : result.cases) {
      const auto [run, options] = CaseRun(request, c, communicator.size());
      try {
        executor::CheckExpertParallelRun(run, options, presets, communicator.size());
      } catch (const base::Error& e) {
        // The run's message names run's options: say whose they are.
        throw base::Error("validate --cases ep runs each case as `moelab run --expert-parallel " +
                          std::to_string(communicator.size()) +
                          "` on these ranks, which refuses: " + e.what());
      }
    }
  } catch (const base::Error& e) {
    refusal = e.what();
  }
  Agree(communicator, refusal);
  int rounds_done = 0;
  const auto run_rounds_until = [&](int rounds) {
    for (; rounds_done < rounds; ++rounds_done)
      RunCaseRound(request, presets, communicator, rounds_done, result.cases);
  };
  const auto predict = [&] {
    std::string error;
    if (communicator.rank() == 0) {
      try {
        Predict(request, presets, communicator.size(), result);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    Agree(communicator, error);
  };
  if (request.profile) {
    try {
      result.profile = base::JsonReader::ParseFile(*request.profile);
    } catch (const base::Error& e) {
      throw parallel::AgreedError(e.what());  // every rank read the same file
    }
    predict();
    run_rounds_until(request.repeat);
    result.notes.push_back(
        "the profile was reused: it was taken at another time than the runs, and the machine's "
        "speed may have moved since");
  } else {
    // The case rounds between the profile's rounds (P1 C1 P2 C2 ...), as validate's other cases
    // run (run_validation.h): this machine's speed moves by 10-25 % over minutes, and with the
    // profile first every case of a 2026-12-05 run, each term alike (attention, expert compute,
    // the rest), measured 15-30 % above what the profile taken before priced.
    result.profile = ProfileNow(request, presets, communicator, [&](int round, int rounds) {
      run_rounds_until(CaseRoundsBy(round, rounds, request.repeat));
    });
    run_rounds_until(request.repeat);
    predict();
    result.profile_interleaved = true;
  }
  std::vector<double> errors;
  for (EpValidationCase& c : result.cases) {
    c.measured_step_s = base::Median(c.runs_step_s);
    c.measured_terms = MedianTerms(c.runs_terms);
    errors.push_back(std::abs(c.error()));
  }
  if (communicator.rank() != 0) return result;
  result.median_abs_error = base::Median(errors);
  result.max_abs_error = *std::max_element(errors.begin(), errors.end());
  result.best_chunks = BestChunks(result.cases);
  result.load_average_1m_end = profiler::LoadAverage1m();
  const double cores = static_cast<double>(profiler::PhysicalCores());
  // The load average at the end counts this job's own ranks and their threads (an MPI rank
  // waiting in a collective spins): only what is beyond them is another job's.
  const double own = static_cast<double>(communicator.size() * request.threads);
  const double others_end = std::max(0.0, result.load_average_1m_end - own);
  if (std::max(result.load_average_1m_start, others_end) > 0.3 * cores) {
    char text[200];
    std::snprintf(
        text, sizeof(text),
        "the machine was busy (1-minute load average %.1f at the start, %.1f at the end "
        "beyond this job's %d ranks x %d threads, %d cores): times are inflated and noisy",
        result.load_average_1m_start, others_end, communicator.size(), request.threads,
        static_cast<int>(cores));
    result.notes.push_back(text);
  }
  return result;
}

}  // namespace moelab::validate
