#include "validate/run_validation.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/limits.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/run_workload.h"
#include "fit/fit_json.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "kernels/weight_matrix.h"
#include "model/cost_source.h"
#include "model/executor_shape.h"
#include "model/forward_cost.h"
#include "profiler/machine_info.h"
#include "profiler/machine_limits.h"
#include "profiler/profiler.h"
#include "report/format.h"
#include "report/provenance.h"
#include "routing/expert_activation_sampler.h"
#include "routing/routing_trace.h"
#include "validate/case_prediction.h"
#include "validate/executor_bench.h"
#include "validate/impl/case_judge.h"
#include "validate/impl/cost_sources.h"
#include "validate/impl/reused_profile.h"
#include "validate/offload_cases.h"
#include "validate/round_limits.h"

namespace moelab::validate {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

using Say = std::function<void(const std::string&)>;

// The target and the draft validate runs: the request's presets at its shapes (the executor's
// defaults where unset), the target in the requested weight formats.
struct ValidatedModels {
  model::ShapeOverrides target_shape, draft_shape;
  executor::ExecutorConfig target, draft;
};

ValidatedModels ModelsOf(const ValidationRequest& request, const model::PresetStore& presets) {
  ValidatedModels m;
  m.target_shape = model::DefaultTargetShape().OverriddenBy(request.shape);
  m.draft_shape = model::DefaultDraftShape().OverriddenBy(request.draft_shape);
  m.target = executor::ExecutorConfigFromSpec(presets.LoadModel(request.model), m.target_shape);
  m.target.expert_format = kernels::WeightFormatFromBits(request.expert_bits, "--expert-bits");
  m.target.attention_format =
      kernels::WeightFormatFromBits(request.attention_bits, "--attention-bits");
  if (!m.target.is_moe())
    throw base::Error("validate predicts a MoE target; '" + m.target.name + "' is dense");
  if (!m.draft_shape.vocab) m.draft_shape.vocab = m.target.vocab_size;
  m.draft = executor::ExecutorConfigFromSpec(presets.LoadModel(request.draft), m.draft_shape);
  return m;
}

// --device gpu: refused before anything runs, not at the fit after every case round.
void RequireUsableGpu(const ValidationRequest& request) {
  if (request.profile) impl::RequireReusedGpuProfile(request.profile->string());
  const std::string why_not = executor::GpuUnavailableReason(0);
  if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
}

// The recorded routings' size: as many sequences as the largest batch predicted (at least 2), so
// a pass of B sequences draws B different recorded ones, and rounds of the largest gamma (at
// least 1). Recorded at batch 2, a batch-3 verify pass drew from two sequences' segments and was
// priced at 4.5 distinct experts per layer where the runs activated 4.7-4.9 (each sequence keeps
// returning to its own experts round after round).
struct RecordingSize {
  int64_t gamma = 1, batch = 2;
};

RecordingSize RecordingSizeOf(const ValidationPlan& plan) {
  RecordingSize size;
  for (const ValidationCase& c : plan.cases) {
    size.gamma = std::max(size.gamma, c.gamma);
    size.batch = std::max(size.batch, c.batch);
  }
  return size;
}

// A routing recorded from the executor's gate on the target's shape and, when the plan has one,
// on the held-out shape.
struct RecordedRouting {
  std::unique_ptr<routing::SampledExpertActivation> target, held_out;

  const model::ExpertActivation* For(const ValidationCase& spec) const {
    return spec.held_out_shape ? held_out.get() : target.get();
  }
};

// The "measured" routing (a diagnostic): SD and decode runs, the SD runs' own verify passes
// included, saved as routing-trace.json.
RecordedRouting RecordMeasuredRouting(ExecutorBench& bench, const ValidationPlan& plan,
                                      const RecordingSize& size, const ValidationRequest& request,
                                      const Say& say, ValidationResult& result) {
  say("recording the executor's gate routing (" + std::to_string(size.batch) +
      " sequences: SD at gamma " + std::to_string(size.gamma) + ", decode)");
  const routing::RoutingTrace trace = bench.RecordRouting(false, size.gamma, size.batch);
  result.routing_trace_path = (request.work_dir / "routing-trace.json").string();
  routing::SaveRoutingTrace(trace, result.routing_trace_path);
  RecordedRouting recorded;
  recorded.target =
      routing::SampledExpertActivation::FromTrace(trace, result.routing_trace_path, request.seed);
  result.routing = recorded.target->Describe();
  if (plan.held_out_layers > 0) {
    recorded.held_out = routing::SampledExpertActivation::FromTrace(
        bench.RecordRouting(true, size.gamma, size.batch), "executor gate of the held-out shape",
        request.seed);
  }
  return recorded;
}

// The headline's routing: what a user has before trying SD, a plain decode recorded in a run of
// its own (its verify passes are priced from windows of consecutive decode tokens), saved as
// decode-trace.json.
RecordedRouting RecordDecodeRouting(ExecutorBench& bench, const ValidationPlan& plan,
                                    const RecordingSize& size, const ValidationRequest& request,
                                    const Say& say, ValidationResult& result) {
  const int64_t decode_tokens = std::max<int64_t>(33, 4 * (size.gamma + 1) + 1);
  say("recording a decode run's gate routing (" + std::to_string(size.batch) + " sequences, " +
      std::to_string(decode_tokens) + " tokens): the headline's routing");
  const routing::RoutingTrace decode_trace =
      bench.RecordDecodeRouting(false, size.batch, decode_tokens);
  result.decode_trace_path = (request.work_dir / "decode-trace.json").string();
  routing::SaveRoutingTrace(decode_trace, result.decode_trace_path);
  RecordedRouting recorded;
  recorded.target = routing::SampledExpertActivation::FromTrace(
      decode_trace, result.decode_trace_path, request.seed);
  result.decode_routing = recorded.target->Describe();
  if (plan.held_out_layers > 0) {
    recorded.held_out = routing::SampledExpertActivation::FromTrace(
        bench.RecordDecodeRouting(true, size.batch, decode_tokens),
        "executor gate of the held-out shape in a decode run of its own", request.seed);
  }
  return recorded;
}

// The case rounds: every case once per round (RunsPerRound times), in the same order, the
// machine's limits probed first (into result.round_limits), then the offload cases' round.
class CaseRounds {
 public:
  CaseRounds(const ValidationPlan& plan, ExecutorBench& bench, OffloadValidation* offload,
             int repeats, const Say& say, ValidationResult& result)
      : plan_(plan),
        bench_(bench),
        offload_(offload),
        repeats_(repeats),
        say_(say),
        result_(result),
        limit_buffer_(static_cast<size_t>(
            std::max<int64_t>(4 * profiler::L3CacheBytes(), int64_t{256} << 20))),
        runs_(plan.cases.size()) {}

  // Runs the rounds up to `until` (of `repeats`) that have not run yet.
  void RunUntil(int until) {
    for (; rounds_run_ < until; ++rounds_run_) {
      const Clock::time_point round_start = Clock::now();
      result_.round_limits.push_back(
          profiler::MeasureMachineLimits(bench_.pool(), limit_buffer_, 1));
      for (size_t i = 0; i < plan_.cases.size(); ++i) {
        say_("round " + std::to_string(rounds_run_ + 1) + "/" + std::to_string(repeats_) +
             ", case " + std::to_string(i + 1) + "/" + std::to_string(plan_.cases.size()) + ": " +
             plan_.cases[i].Label());
        // A case whose model did not run just before (the round's first, after the probe's
        // stream and the profile's round; the first of the held-out shape) runs once untimed:
        // the caches held none of its weights. Its experts were priced 11-15 % under their
        // measured time in 12 of the 18 validate records of 12-07 (the later cases, each after a
        // run of the same model as a user's decode step follows the last, scatter around 0).
        if (i == 0 || plan_.cases[i].held_out_shape != plan_.cases[i - 1].held_out_shape) {
          bench_.Run(plan_.cases[i]);
          ++result_.warm_up_runs;
        }
        for (int t = 0; t < RunsPerRound(plan_.cases[i].kind); ++t)
          runs_[i].push_back(bench_.Run(plan_.cases[i]));
      }
      if (offload_) offload_->RunRound();
      SayTimeLeft(Seconds(round_start));
    }
  }
  int repeats() const { return repeats_; }
  // [case]: every run so far, round by round.
  const std::vector<std::vector<CaseRun>>& runs() const { return runs_; }

 private:
  // Rounds are alike, so the ones run so far price the rest (the profile's own rounds, run
  // between them, come on top).
  void SayTimeLeft(double round_s) {
    rounds_s_ += round_s;
    const int done = rounds_run_ + 1;
    say_("round " + std::to_string(done) + "/" + std::to_string(repeats_) + " took " +
         report::FormatSeconds(round_s) +
         (done < repeats_ ? "; the case rounds left take about " +
                                report::FormatSeconds(rounds_s_ / done * (repeats_ - done))
                          : std::string()));
  }

  const ValidationPlan& plan_;
  ExecutorBench& bench_;
  OffloadValidation* offload_;
  int repeats_;
  const Say& say_;
  ValidationResult& result_;
  size_t limit_buffer_;
  std::vector<std::vector<CaseRun>> runs_;
  int rounds_run_ = 0;
  double rounds_s_ = 0;
};

// The profile validate takes: the executor's operators on the request's models and formats, the
// quick or full grid at five rounds at least.
profiler::ProfileRequest ProfileRequestFor(const ValidationRequest& request,
                                           const ValidatedModels& models, bool on_gpu) {
  profiler::ProfileRequest profile_request;
  profile_request.model = request.model;
  profile_request.shape = models.target_shape;
  profile_request.draft = request.draft;
  profile_request.draft_shape = models.draft_shape;
  profile_request.quick = request.quick;
  // Five rounds for the quick grid too (moelab profile --quick takes three): a profile sample
  // prices every case that uses its operator, so one slow median moves a whole group of
  // predictions together (in two quick runs every decode case at context 2000 came out 10-27 %
  // over, from attention samples whose three rounds spread up to 3x), and the median of five
  // leaves out two slow rounds where that of three leaves out one. About 90 s more.
  profile_request.grid = request.quick ? profiler::GridSpec::Quick() : profiler::GridSpec::Full();
  profile_request.grid->repetitions =
      request.profile_rounds > 0
          ? request.profile_rounds
          : std::max(profile_request.grid->repetitions, ValidationRequest::kDefaultProfileRounds);
  profile_request.expert_bits = request.expert_bits;
  profile_request.attention_bits = request.attention_bits;
  profile_request.threads = request.threads;
  profile_request.cache_bytes = request.cache_bytes;
  profile_request.seed = request.seed;
  // On a GPU, the GPU's operators only: they price its passes, and the CPU's would take minutes.
  profile_request.use_gpu = on_gpu;
  profile_request.cpu_operators = !on_gpu;
  profile_request.storage_dir = request.work_dir;
  return profile_request;
}

// The profile (its JSON) with every case round run: a reused --profile and the rounds after it,
// or a profile taken here with the case rounds between its rounds (P1 C1 P2 C2 ...), written to
// work_dir / profile.json. Why interleaved: a shared machine's speed moves by 10-20 % over
// minutes, and a profile taken before the runs priced them at another speed (a quick run measured
// every decode case 8-26 % slower than a profile taken minutes earlier predicted; in another the
// cases ran 11 % faster). Interleaved, the profile's medians and the cases' medians are taken over
// the same stretch of time. A speed anchor timed around the profile and the rounds tried to
// correct it afterwards: a moment's probe, it did not follow the cases (12 alternating pairs of
// its kernel and a batch-2 decode correlated at -0.05) and moved predictions the wrong way.
nlohmann::json ProfileWithRounds(const ValidationRequest& request,
                                 const model::PresetStore& presets, const ValidatedModels& models,
                                 bool on_gpu, CaseRounds& rounds, const Say& say,
                                 ValidationResult& result) {
  if (request.profile) {
    result.profile_path = request.profile->string();
    result.profile_reused = true;
    nlohmann::json profile_json = impl::ReadReusedProfile(result.profile_path, models.target);
    rounds.RunUntil(rounds.repeats());
    result.notes.push_back(
        "the profile was reused: it was taken at another time than the runs, and the machine's "
        "speed may have moved since");
    return profile_json;
  }
  say(std::string("profiling the executor's operators (") + (request.quick ? "quick" : "full") +
      " grid), the case rounds between its rounds");
  profiler::ProfileRequest profile_request = ProfileRequestFor(request, models, on_gpu);
  profile_request.after_round = [&](int round, int profile_rounds) {
    rounds.RunUntil(CaseRoundsBy(round, profile_rounds, rounds.repeats()));
  };
  nlohmann::json profile_json = profiler::RunProfile(profile_request, presets);
  rounds.RunUntil(rounds.repeats());  // none left unless the grid has no rounds to interleave with
  result.profile_interleaved = true;
  profile_json["provenance"] = report::Provenance();
  result.profile_path = (request.work_dir / "profile.json").string();
  profiler::WriteProfile(profile_json, result.profile_path);
  return profile_json;
}

// The profile read for the fit, and its latency curves, written to work_dir / fit.json.
struct FittedProfile {
  fit::Profile profile;
  fit::LatencyFit fit;
};

// --reused-profile: the earlier profile read, refused unless it measured what the executor runs,
// fitted (work_dir / reused-fit.json) and made the kReusedProfileSource cost source; one decode
// pass of the target priced at once, so a profile of another shape or device is refused before
// any case runs rather than after all of them. Null without --reused-profile.
std::shared_ptr<const model::CostSource> FitReusedProfile(const ValidationRequest& request,
                                                          const ValidatedModels& models,
                                                          bool on_gpu, const Say& say,
                                                          ValidationResult& result) {
  if (!request.reused_profile) return nullptr;
  result.reused_profile_path = request.reused_profile->string();
  if (on_gpu) impl::RequireReusedGpuProfile(result.reused_profile_path);
  const nlohmann::json profile_json =
      impl::ReadReusedProfile(result.reused_profile_path, models.target);
  say("fitting the reused profile " + result.reused_profile_path +
      " (priced beside the headline's profile)");
  fit::LatencyFit fitted =
      fit::FitLatency(fit::ProfileFromJson(profile_json, result.reused_profile_path), {});
  fitted.profile = result.reused_profile_path;
  result.reused_fit_path = (request.work_dir / "reused-fit.json").string();
  base::WriteFileAtomically(result.reused_fit_path, fit::LatencyFitToJson(fitted).dump(2) + "\n");
  std::shared_ptr<const model::CostSource> source = impl::ReusedProfileCostSource(
      fitted, executor::SpecFromExecutorConfig(models.target), on_gpu ? "cuda:0" : "cpu");
  try {
    model::ForwardShape decode;
    decode.context_length = 16;
    source->Forward(executor::SpecFromExecutorConfig(models.target), decode);
  } catch (const base::Error& error) {
    throw base::Error("--reused-profile " + result.reused_profile_path +
                      ": it cannot price validate's target: " + error.what());
  }
  return source;
}

FittedProfile FitProfile(const nlohmann::json& profile_json, const ValidationRequest& request,
                         const Say& say, ValidationResult& result) {
  FittedProfile fitted{fit::ProfileFromJson(profile_json, result.profile_path), {}};
  result.machine = profile_json["machine"];
  say("fitting latency curves and the calibrated roofline");
  fitted.fit = fit::FitLatency(fitted.profile, fit::FitOptions{});
  fitted.fit.profile = result.profile_path;
  result.fit_path = (request.work_dir / "fit.json").string();
  base::WriteFileAtomically(result.fit_path, fit::LatencyFitToJson(fitted.fit).dump(2) + "\n");
  return fitted;
}
}  // namespace

int CaseRoundsBy(int profile_round, int profile_rounds, int case_rounds) {
  if (profile_rounds < 1 || profile_round < 0 || profile_round > profile_rounds || case_rounds < 0)
    throw base::Error("case rounds by profile round " + std::to_string(profile_round) + " of " +
                      std::to_string(profile_rounds) + ": out of range (a bug)");
  int done = 0;
  // ceil((2k + 1) R / 2N) <= r, in integers.
  while (done < case_rounds &&
         ((2 * done + 1) * profile_rounds + 2 * case_rounds - 1) / (2 * case_rounds) <=
             profile_round)
    ++done;
  return done;
}

void ValidationRequest::Validate() const {
  if (repeat < 0) throw base::Error("--repeat must be >= 1, got " + std::to_string(repeat));
  if (repeat > 100)
    throw base::Error("--repeat " + std::to_string(repeat) + ": at most 100 runs per case");
  if (!(alpha >= 0 && alpha < 1)) throw base::Error("--alpha must be in [0, 1)");
  if (threads < 0) throw base::Error("--threads must be >= 1");
  base::CheckCount(threads, 0, base::kMaxThreads, "--threads",
                   "the pool starts one OS thread each, as moelab run's");
  if (work_dir.empty())
    throw base::Error("validate needs a folder for its profile, fit and routing trace");
  kernels::WeightFormatFromBits(expert_bits, "--expert-bits");
  kernels::WeightFormatFromBits(attention_bits, "--attention-bits");
  if (device != "cpu" && device != "gpu")
    throw base::Error("--device '" + device + "': expected cpu or gpu");
  if (timelines && kinds.count(CaseKind::kOffload) == 0)
    throw base::Error("--timelines records the offload cases' runs: add --cases offload");
  if (cache_bytes) profiler::CheckCacheBytesOption(*cache_bytes);
  if (profile_rounds < 0 || profile_rounds > 100) {
    throw base::Error("--profile-rounds " + std::to_string(profile_rounds) +
                      ": expected 1 to 100 rounds of the profile grid");
  }
  if (profile_rounds > 0 && profile) {
    throw base::Error(
        "--profile-rounds sets the rounds of the profile validate takes; with --profile it takes "
        "none");
  }
  if (cache_bytes && profile) {
    throw base::Error(
        "--cache-bytes sets the cache of the profile validate takes; with --profile "
        "it takes none (the profile's notes say what it was cycled against)");
  }
  if (device == "gpu") {
    if (kinds.count(CaseKind::kOffload) > 0) {
      throw base::Error(
          "--cases offload runs the CPU-only machine's storage tier; with --device gpu it is not "
          "validated yet (moelab run --device gpu --offload runs the host -> GPU tier)");
    }
    if (expert_bits != 16 || attention_bits != 16) {
      throw base::Error(
          "--device gpu runs bf16 weights only: the GPU backend has no kernels for "
          "--expert-bits / --attention-bits " +
          std::to_string(expert_bits) + " / " + std::to_string(attention_bits));
    }
  }
}

const ErrorSummary& ValidationResult::Headline() const {
  for (const ErrorSummary& s : summaries) {
    if (s.kind == "overall" && s.cost_source == "fitted-profile" &&
        s.routing_assumed == kDecodeTraceRouting)
      return s;
  }
  // --cases offload alone: its cases replay their own runs' routing.
  for (const ErrorSummary& s : summaries) {
    if (s.kind == "overall" && s.cost_source == "fitted-profile" &&
        s.routing_assumed == kMeasuredRouting)
      return s;
  }
  if (summaries.empty()) throw base::Error("validate judged no case");
  return summaries.front();
}

const ErrorSummary* ValidationResult::ReusedProfileSummary() const {
  if (reused_profile_path.empty()) return nullptr;
  const ErrorSummary& headline = Headline();
  for (const ErrorSummary& s : summaries) {
    if (s.kind == "overall" && s.cost_source == kReusedProfileSource &&
        s.routing_assumed == headline.routing_assumed)
      return &s;
  }
  return nullptr;
}

ValidationResult RunValidation(const ValidationRequest& request,
                               const model::PresetStore& presets) {
  request.Validate();
  const Clock::time_point start = Clock::now();
  std::ostream* progress = request.progress;
  const Say say = [&](const std::string& line) {
    if (progress)
      *progress << "[validate " << static_cast<int64_t>(Seconds(start)) << " s] " << line
                << std::endl;
  };
  ValidationResult result;
  result.request = request;
  const ValidatedModels models = ModelsOf(request, presets);
  const ValidationPlan plan = DefaultPlan(request.quick, request.kinds, models.target.num_layers);
  const bool offload_requested =
      request.kinds.count(CaseKind::kOffload) > 0;  // validate/offload_cases.h
  if (plan.cases.empty() && !offload_requested) throw base::Error("--cases selects no case");
  if (plan.cases.empty() && request.reused_profile) {
    throw base::Error(
        "--reused-profile prices the in-memory cases (decode, prefill, sd, beam): --cases offload "
        "alone has none");
  }
  const bool on_gpu = request.device == "gpu";
  if (on_gpu) RequireUsableGpu(request);
  std::filesystem::create_directories(request.work_dir);
  const std::shared_ptr<const model::CostSource> reused_source =
      FitReusedProfile(request, models, on_gpu, say, result);

  // 1. The executor, its own routing: built first, so that the case rounds can run between the
  // profile's rounds.
  say("building the executor's models (synthetic weights, seed " + std::to_string(request.seed) +
      ")");
  ExecutorBench bench(models.target, plan.held_out_layers, models.draft, request.seed,
                      request.threads, request.alpha, request.device);
  const RecordingSize size = RecordingSizeOf(plan);
  const RecordedRouting measured_routing =
      RecordMeasuredRouting(bench, plan, size, request, say, result);
  const RecordedRouting decode_routing =
      RecordDecodeRouting(bench, plan, size, request, say, result);
  bench.Run({CaseKind::kDecode, false, 1, 8, 0, 3, 0, 0, {}, 0});  // warm-up: page in weights, spin
                                                                   // up threads

  std::optional<OffloadValidation> offload;  // --cases offload: its store, routing and rounds
  if (offload_requested) offload.emplace(request, models.target, say);

  // 2. Rounds: every case once per round, in the same order, limits probed first; 3. the
  // profile, its rounds and the case rounds interleaved.
  CaseRounds rounds(plan, bench, offload ? &*offload : nullptr, request.Repeats(), say, result);
  const nlohmann::json profile_json =
      ProfileWithRounds(request, presets, models, on_gpu, rounds, say, result);
  for (std::string& note : SlowRoundNotes(result.round_limits))
    result.notes.push_back(std::move(note));
  const FittedProfile fitted = FitProfile(profile_json, request, say, result);
  const model::MoeModelSpec target_spec = executor::SpecFromExecutorConfig(models.target);
  impl::CostSources sources = impl::CostSourcesFor(fitted.fit, fitted.profile, target_spec, on_gpu);
  if (reused_source) sources.sources.push_back(reused_source);
  for (const std::string& note : sources.notes) result.notes.push_back(note);
  for (const auto& source : sources.sources) result.cost_sources.push_back(source->name());
  PredictedModels predicted_models{target_spec, target_spec,
                                   executor::SpecFromExecutorConfig(models.draft)};
  if (plan.held_out_layers > 0)
    predicted_models.held_out = executor::SpecFromExecutorConfig(bench.target_config(true));

  // 4. Predictions against the medians.
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    const ValidationCase& spec = plan.cases[i];
    const impl::AssumedRoutings routings = {{decode_routing.For(spec), kDecodeTraceRouting},
                                            {measured_routing.For(spec), kMeasuredRouting},
                                            {nullptr, kUniformRouting}};
    const impl::MeasuredCase measured = impl::MeasureCase(plan.cases, rounds.runs(), i);
    for (CaseResult& r :
         impl::JudgeCase(spec, measured, sources.sources, routings, predicted_models))
      result.cases.push_back(std::move(r));
  }
  if (offload) offload->Judge(fitted.profile, fitted.fit, result);
  result.summaries = Summarize(result.cases);
  result.best_gamma = BestGamma(result.cases);
  result.wall_time_s = Seconds(start);
  say("done");
  return result;
}

}  // namespace moelab::validate
