#include "validate/run_validation.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <set>

#include "base/error.h"
#include "fit/cost_calibration.h"
#include "fit/fit_json.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "fit/profile_cost_source.h"
#include "base/atomic_file.h"
#include "base/json_reader.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/run_workload.h"
#include "kernels/cpu_features.h"
#include "kernels/weight_matrix.h"
#include "profiler/machine_info.h"
#include "profiler/machine_limits.h"
#include "profiler/profiler.h"
#include "report/provenance.h"
#include "routing/expert_activation_sampler.h"
#include "validate/case_prediction.h"
#include "validate/executor_bench.h"
#include "validate/offload_cases.h"

namespace moelab::validate {
namespace {

using Clock = std::chrono::steady_clock;

// A reused profile must have measured the code the executor runs: the same kernel path
// (machine.isa; machine.quantized_kernel where recorded) and the same weight formats (profiles
// without the fields were taken on bf16 weights). Otherwise its curves price other kernels or
// other bytes.
void RequireProfiledFormats(const nlohmann::json& profile, const std::string& path,
                            const executor::ExecutorConfig& target) {
  const nlohmann::json& machine = profile["machine"];
  const std::pair<const char*, std::string> paths[] = {
      {"isa", kernels::ToString(kernels::ActiveIsa())},
      {"quantized_kernel", kernels::ToString(kernels::ActiveQuantizedKernel())}};
  for (const auto& [field, running] : paths) {
    if (!machine.contains(field) || !machine[field].is_string()) continue;
    if (machine[field].get<std::string>() != running) {
      throw base::Error(path + ": field 'machine." + field + "' is " +
                        machine[field].get<std::string>() + " but the kernels run " + running +
                        " here (MOELAB_ISA): profile on the path validate runs");
    }
  }
  const nlohmann::json& shape = profile["model"]["shape"];
  const std::pair<const char*, kernels::WeightFormat> parts[] = {
      {"expert", target.expert_format}, {"attention", target.attention_format}};
  for (const auto& [part, format] : parts) {
    const std::string field = std::string(part) + "_format";
    const std::string profiled = shape.contains(field) && shape[field].is_string()
                                     ? shape[field].get<std::string>()
                                     : std::string("bf16");
    if (profiled != kernels::ToString(format)) {
      throw base::Error(path + ": field 'model.shape." + field + "' is " + profiled +
                        " but validate runs " + part + " weights as " + kernels::ToString(format) +
                        " (--" + part + "-bits): profile with the same formats");
    }
  }
}

// --device gpu with a reused --profile: it must have measured the operators the fitted source
// prices on cuda:0, refused before any case runs rather than at the fit after all of them.
void RequireGpuSamples(const nlohmann::json& profile, const std::string& path) {
  std::set<std::string> measured;
  for (const nlohmann::json& sample : profile["samples"]) {
    if (sample.value("device", std::string()) == "cuda:0")
      measured.insert(sample.value("operator", std::string()));
  }
  for (const char* op : {"attention_decode", "expert_ffn", "router", "lm_head", "dense_ffn"}) {
    if (!measured.count(op)) {
      throw base::Error(path + ": --device gpu needs the profile's " + op +
                        " samples on cuda:0 (a profile taken where the GPU was measured through "
                        "the executor's backend); it has none");
    }
  }
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

executor::ShapeOverrides Merge(const executor::ShapeOverrides& defaults,
                               const executor::ShapeOverrides& given) {
  executor::ShapeOverrides s = defaults;
  for (auto [field, value] : {std::pair{&s.layers, given.layers},
                              {&s.hidden, given.hidden},
                              {&s.intermediate, given.intermediate},
                              {&s.dense_intermediate, given.dense_intermediate},
                              {&s.experts, given.experts},
                              {&s.top_k, given.top_k},
                              {&s.heads, given.heads},
                              {&s.kv_heads, given.kv_heads},
                              {&s.head_dim, given.head_dim},
                              {&s.vocab, given.vocab},
                              {&s.shared_experts, given.shared_experts},
                              {&s.shared_intermediate, given.shared_intermediate},
                              {&s.max_positions, given.max_positions}}) {
    if (value) *field = value;
  }
  return s;
}

// The calibrated roofline of the profiled machine: its measured limits with the efficiencies its
// samples fit, at the dtype whose peak it measured (bf16 where the CPU has it, else fp32).
std::shared_ptr<const model::CostSource> CalibratedSource(const fit::Profile& profile) {
  const std::string dtype =
      profile.limits && profile.limits->peak_flops.count("bf16") ? "bf16" : "fp32";
  model::CostParameters assumed;
  assumed.compute_dtype = dtype;
  const fit::CostCalibration calibration = fit::CalibrateCosts(
      profile, fit::RooflineFromLimits(profile, dtype), assumed, fit::FitOptions{});
  const model::HardwareSpec machine = fit::HardwareFromProfile(profile);
  return std::make_shared<model::RooflineCostSource>(
      model::ComputeTargetOf(machine, dtype), calibration.params, "calibrated-roofline",
      nlohmann::json{{"cost_calibration", calibration.ToJson()}});
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
  if (work_dir.empty())
    throw base::Error("validate needs a folder for its profile, fit and routing trace");
  kernels::WeightFormatFromBits(expert_bits, "--expert-bits");
  kernels::WeightFormatFromBits(attention_bits, "--attention-bits");
  if (device != "cpu" && device != "gpu")
    throw base::Error("--device '" + device + "': expected cpu or gpu");
  if (timelines && kinds.count(CaseKind::kOffload) == 0)
    throw base::Error("--timelines records the offload cases' runs: add --cases offload");
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

ValidationResult RunValidation(const ValidationRequest& request,
                               const model::PresetStore& presets) {
  request.Validate();
  const Clock::time_point start = Clock::now();
  std::ostream* progress = request.progress;
  const auto say = [&](const std::string& line) {
    if (progress)
      *progress << "[validate " << static_cast<int64_t>(Seconds(start)) << " s] " << line
                << std::endl;
  };
  ValidationResult result;
  result.request = request;
  const executor::ShapeOverrides target_shape =
      Merge(executor::DefaultTargetShape(), request.shape);
  executor::ShapeOverrides draft_shape = Merge(executor::DefaultDraftShape(), request.draft_shape);
  executor::ExecutorConfig target =
      executor::ExecutorConfigFromSpec(presets.LoadModel(request.model), target_shape);
  target.expert_format = kernels::WeightFormatFromBits(request.expert_bits, "--expert-bits");
  target.attention_format =
      kernels::WeightFormatFromBits(request.attention_bits, "--attention-bits");
  if (!target.is_moe())
    throw base::Error("validate predicts a MoE target; '" + target.name + "' is dense");
  if (!draft_shape.vocab) draft_shape.vocab = target.vocab_size;
  const executor::ExecutorConfig draft =
      executor::ExecutorConfigFromSpec(presets.LoadModel(request.draft), draft_shape);
  const ValidationPlan plan = DefaultPlan(request.quick, request.kinds, target.num_layers);
  const bool offload_requested =
      request.kinds.count(CaseKind::kOffload) > 0;  // validate/offload_cases.h
  if (plan.cases.empty() && !offload_requested) throw base::Error("--cases selects no case");
  const bool on_gpu = request.device == "gpu";
  if (on_gpu && request.profile) {
    // Refused before anything runs, not at the fit after every case round.
    const nlohmann::json reused = base::JsonReader::ParseFile(request.profile->string());
    profiler::ValidateProfile(reused);
    RequireGpuSamples(reused, request.profile->string());
  }
  if (on_gpu) {
    const std::string why_not = executor::GpuUnavailableReason(0);
    if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  }
  std::filesystem::create_directories(request.work_dir);

  // 1. The executor, its own routing: built first, so that the case rounds can run between the
  // profile's rounds.
  say("building the executor's models (synthetic weights, seed " + std::to_string(request.seed) +
      ")");
  ExecutorBench bench(target, plan.held_out_layers, draft, request.seed, request.threads,
                      request.alpha, request.device);
  int64_t max_gamma = 1, max_batch = 2;
  for (const ValidationCase& c : plan.cases) {
    max_gamma = std::max(max_gamma, c.gamma);
    max_batch = std::max(max_batch, c.batch);
  }
  // As many sequences as the largest batch predicted: a pass of B sequences draws B different
  // recorded ones. Recorded at batch 2, a batch-3 verify pass drew from two sequences' segments
  // and was priced at 4.5 distinct experts per layer where the runs activated 4.7-4.9 (each
  // sequence keeps returning to its own experts round after round).
  say("recording the executor's gate routing (" + std::to_string(max_batch) +
      " sequences: SD at gamma " + std::to_string(max_gamma) + ", decode)");
  const routing::RoutingTrace trace = bench.RecordRouting(false, max_gamma, max_batch);
  result.routing_trace_path = (request.work_dir / "routing-trace.json").string();
  routing::SaveRoutingTrace(trace, result.routing_trace_path);
  const auto routing =
      routing::SampledExpertActivation::FromTrace(trace, result.routing_trace_path, request.seed);
  result.routing = routing->Describe();
  std::unique_ptr<routing::SampledExpertActivation> held_out_routing;
  if (plan.held_out_layers > 0) {
    held_out_routing = routing::SampledExpertActivation::FromTrace(
        bench.RecordRouting(true, max_gamma, max_batch), "executor gate of the held-out shape",
        request.seed);
  }
  // The headline's routing: what a user has before trying SD, a plain decode recorded in a run
  // of its own (its verify passes are priced from windows of consecutive decode tokens). The
  // trace above, which has the SD runs' own verify passes, is kept as a diagnostic ("measured").
  const int64_t decode_tokens = std::max<int64_t>(33, 4 * (max_gamma + 1) + 1);
  say("recording a decode run's gate routing (" + std::to_string(max_batch) + " sequences, " +
      std::to_string(decode_tokens) + " tokens): the headline's routing");
  const routing::RoutingTrace decode_trace =
      bench.RecordDecodeRouting(false, max_batch, decode_tokens);
  result.decode_trace_path = (request.work_dir / "decode-trace.json").string();
  routing::SaveRoutingTrace(decode_trace, result.decode_trace_path);
  const auto decode_routing = routing::SampledExpertActivation::FromTrace(
      decode_trace, result.decode_trace_path, request.seed);
  result.decode_routing = decode_routing->Describe();
  std::unique_ptr<routing::SampledExpertActivation> held_out_decode_routing;
  if (plan.held_out_layers > 0) {
    held_out_decode_routing = routing::SampledExpertActivation::FromTrace(
        bench.RecordDecodeRouting(true, max_batch, decode_tokens),
        "executor gate of the held-out shape in a decode run of its own", request.seed);
  }
  bench.Run({CaseKind::kDecode, false, 1, 8, 0, 3, 0, 0, {}, 0});  // warm-up: page in weights, spin
                                                                   // up threads

  std::optional<OffloadValidation> offload;  // --cases offload: its store, routing and rounds
  if (offload_requested) offload.emplace(request, target, say);

  // 2. Rounds: every case once per round, in the same order, limits probed first.
  const int repeats = request.Repeats();
  const size_t limit_buffer =
      static_cast<size_t>(std::max<int64_t>(4 * profiler::L3CacheBytes(), int64_t{256} << 20));
  std::vector<std::vector<CaseRun>> runs(plan.cases.size());
  int rounds_run = 0;
  const auto run_rounds = [&](int until) {
    for (; rounds_run < until; ++rounds_run) {
      result.round_limits.push_back(profiler::MeasureMachineLimits(bench.pool(), limit_buffer, 1));
      for (size_t i = 0; i < plan.cases.size(); ++i) {
        say("round " + std::to_string(rounds_run + 1) + "/" + std::to_string(repeats) + ", case " +
            std::to_string(i + 1) + "/" + std::to_string(plan.cases.size()) + ": " +
            plan.cases[i].Label());
        for (int t = 0; t < RunsPerRound(plan.cases[i].kind); ++t)
          runs[i].push_back(bench.Run(plan.cases[i]));
      }
      if (offload) offload->RunRound();
    }
  };

  // 3. The profile, its rounds and the case rounds interleaved (P1 C1 P2 C2 ...): a shared
  // machine's speed moves by 10-20 % over minutes, and a profile taken before the runs priced
  // them at another speed (a quick run measured every decode case 8-26 % slower than a profile
  // taken minutes earlier predicted; in another the cases ran 11 % faster). Interleaved, the
  // profile's medians and the cases' medians are taken over the same stretch of time. A speed
  // anchor timed around the profile and the rounds tried to correct it afterwards: a moment's
  // probe, it did not follow the cases (12 alternating pairs of its kernel and a batch-2 decode
  // correlated at -0.05) and moved predictions the wrong way.
  nlohmann::json profile_json;
  if (request.profile) {
    result.profile_path = request.profile->string();
    result.profile_reused = true;
    profile_json = base::JsonReader::ParseFile(result.profile_path);
    profiler::ValidateProfile(profile_json);
    RequireProfiledFormats(profile_json, result.profile_path, target);
    run_rounds(repeats);
    result.notes.push_back(
        "the profile was reused: it was taken at another time than the runs, and the machine's "
        "speed may have moved since");
  } else {
    say(std::string("profiling the executor's operators (") + (request.quick ? "quick" : "full") +
        " grid), the case rounds between its rounds");
    profiler::ProfileRequest profile_request;
    profile_request.model = request.model;
    profile_request.shape = target_shape;
    profile_request.draft = request.draft;
    profile_request.draft_shape = draft_shape;
    profile_request.quick = request.quick;
    // Five rounds for the quick grid too (moelab profile --quick takes three): a profile sample
    // prices every case that uses its operator, so one slow median moves a whole group of
    // predictions together (in two quick runs every decode case at context 2000 came out 10-27 %
    // over, from attention samples whose three rounds spread up to 3x), and the median of five
    // leaves out two slow rounds where that of three leaves out one. About 90 s more.
    profile_request.grid = request.quick ? profiler::GridSpec::Quick() : profiler::GridSpec::Full();
    profile_request.grid->repetitions = std::max(profile_request.grid->repetitions, 5);
    profile_request.expert_bits = request.expert_bits;
    profile_request.attention_bits = request.attention_bits;
    profile_request.threads = request.threads;
    profile_request.seed = request.seed;
    // On a GPU, the GPU's operators only: they price its passes, and the CPU's would take minutes.
    profile_request.use_gpu = on_gpu;
    profile_request.cpu_operators = !on_gpu;
    profile_request.storage_dir = request.work_dir;
    profile_request.after_round = [&](int round, int rounds) {
      run_rounds(CaseRoundsBy(round, rounds, repeats));
    };
    profile_json = profiler::RunProfile(profile_request, presets);
    run_rounds(repeats);  // none left unless the grid has no rounds to interleave with
    result.profile_interleaved = true;
    profile_json["provenance"] = report::Provenance();
    result.profile_path = (request.work_dir / "profile.json").string();
    profiler::WriteProfile(profile_json, result.profile_path);
  }
  const fit::Profile profile = fit::ProfileFromJson(profile_json, result.profile_path);
  result.machine = profile_json["machine"];
  say("fitting latency curves and the calibrated roofline");
  const fit::LatencyFit fit = [&] {
    fit::LatencyFit f = fit::FitLatency(profile, fit::FitOptions{});
    f.profile = result.profile_path;
    return f;
  }();
  result.fit_path = (request.work_dir / "fit.json").string();
  base::WriteFileAtomically(result.fit_path, fit::LatencyFitToJson(fit).dump(2) + "\n");
  const model::MoeModelSpec target_spec = executor::SpecFromExecutorConfig(target);
  std::vector<std::shared_ptr<const model::CostSource>> sources = {
      std::make_shared<fit::FittedProfileCostSource>(fit, target_spec, on_gpu ? "cuda:0" : "cpu")};
  if (on_gpu) {
    result.notes.push_back(
        "--device gpu: no calibrated-roofline predictions (the profile measures the CPU's limits, "
        "not the GPU's)");
  } else if (profile.limits) {
    sources.push_back(CalibratedSource(profile));
  } else {
    result.notes.push_back(
        "the profile has no measured machine limits: no calibrated-roofline predictions");
  }
  for (const auto& source : sources) result.cost_sources.push_back(source->name());
  PredictedModels models{target_spec, target_spec, executor::SpecFromExecutorConfig(draft)};
  if (plan.held_out_layers > 0)
    models.held_out = executor::SpecFromExecutorConfig(bench.target_config(true));

  // 4. Predictions against the medians.
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    const ValidationCase& spec = plan.cases[i];
    std::vector<double> values;
    for (const CaseRun& run : runs[i]) values.push_back(run.value);
    // From three repeats on, each step's median over them, summed (the runs' totals where their
    // steps differ; fewer repeats have no median that leaves a run's burst out).
    std::vector<std::vector<double>> steps, baseline_steps;
    for (const CaseRun& run : runs[i]) steps.push_back(run.steps_s);
    // An SD speedup's reference: the same plain decode, run before every SD case at this batch
    // (every gamma), pooled: a burst or a calm spell during one case's baseline no longer moves
    // that case alone, and the gammas at a batch share one denominator, so the measured best gamma
    // is the one whose SD run was fastest.
    for (size_t j = 0; j < plan.cases.size(); ++j) {
      if (!SameSdBaseline(spec, plan.cases[j])) continue;
      for (const CaseRun& run : runs[j]) baseline_steps.push_back(run.baseline_steps_s);
    }
    const std::optional<double> steps_sum = SumOfStepMedians(steps);
    const std::optional<double> baseline_sum = SumOfStepMedians(baseline_steps);
    double measured = Median(values);
    const bool by_steps = values.size() >= 3;
    if (by_steps && spec.kind == CaseKind::kSd && steps_sum && baseline_sum) {
      measured = *baseline_sum / *steps_sum;
    } else if (by_steps && spec.kind != CaseKind::kSd && steps_sum && runs[i].front().value > 0) {
      // The quantity per step as each run defines it (its steps' total over its value).
      double front_total = 0;
      for (double s : runs[i].front().steps_s) front_total += s;
      measured = *steps_sum / (front_total / runs[i].front().value);
    }
    std::vector<double> efficiencies, plain_steps, draft_steps, verify_steps;
    std::vector<OperatorSeconds> measured_operators;
    for (const CaseRun& run : runs[i]) {
      if (!run.operators.empty()) measured_operators.push_back(run.operators);
      efficiencies.push_back(run.target_efficiency);
      plain_steps.push_back(run.plain_step_s);
      draft_steps.push_back(run.draft_step_s);
      verify_steps.push_back(run.verify_step_s);
    }
    // Acceptance is seeded: every repeat realizes the same rounds.
    const SdRealization realized{runs[i].front().sequences_per_round,
                                 runs[i].front().catch_up_per_round,
                                 runs[i].front().plain_decode_steps};
    const model::ExpertActivation* recorded =
        spec.held_out_shape ? held_out_routing.get() : routing.get();
    const model::ExpertActivation* decode_recorded =
        spec.held_out_shape ? held_out_decode_routing.get() : decode_routing.get();
    const std::pair<const model::ExpertActivation*, const char*> routings[] = {
        {decode_recorded, kDecodeTraceRouting},
        {recorded, kMeasuredRouting},
        {nullptr, kUniformRouting}};
    for (const auto& source : sources) {
      for (const auto& [assumed, routing_assumed] : routings) {
        const Prediction prediction = Predict(*source, assumed, spec, models, realized);
        CaseResult r;
        r.spec = spec;
        r.cost_source = source->name();
        r.routing = model::DescribeActivation(assumed);
        r.routing_assumed = routing_assumed;
        r.predicted = prediction.value;
        r.measured = measured;
        r.measured_min = *std::min_element(values.begin(), values.end());
        r.measured_max = *std::max_element(values.begin(), values.end());
        r.repeats = static_cast<int>(values.size());
        r.abs_error = AbsError(r.predicted, r.measured);
        if (!measured_operators.empty() && !prediction.operators.empty()) {
          r.predicted_operators_s = prediction.operators;
          r.measured_operators_s = MedianOperatorSeconds(measured_operators);
        }
        if (spec.kind == CaseKind::kSd) {
          r.sigma = runs[i].front().sigma;
          r.predicted_target_efficiency = prediction.target_efficiency;
          r.measured_target_efficiency = Median(efficiencies);
          r.predicted_plain_step_s = prediction.plain_step_s;
          r.predicted_draft_step_s = prediction.draft_step_s;
          r.predicted_verify_step_s = prediction.verify_step_s;
          r.measured_plain_step_s = Median(plain_steps);
          r.measured_draft_step_s = Median(draft_steps);
          r.measured_verify_step_s = Median(verify_steps);
        }
        result.cases.push_back(r);
      }
    }
  }
  if (offload) offload->Judge(profile, fit, result);
  result.summaries = Summarize(result.cases);
  result.best_gamma = BestGamma(result.cases);
  result.wall_time_s = Seconds(start);
  say("done");
  return result;
}

}  // namespace moelab::validate
