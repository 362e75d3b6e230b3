#include "executor/run_workload.h"

#include <chrono>
#include <memory>
#include <thread>
#include <utility>

#include "device/gpu_devices.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/hf_weights.h"
#include "executor/transformer.h"
#include "kernels/cpu_features.h"
#include "base/error.h"
#include "base/system_memory.h"
#include "report/format.h"
#include "model/executor_shape.h"
#include "model/moe_math.h"
#include "routing/routing_source.h"

namespace moelab::executor {
namespace {

// What the run will hold, checked before any weight is built: positions within the model's
// max_positions, and the KV caches (float keys and values of every sequence) plus the weights
// within the memory this machine has available.
void CheckRunFits(const RunRequest& request, const ExecutorConfig& c) {
  const int64_t extra = request.workload == Workload::kSpeculative ? request.gamma + 1 : 0;
  const int64_t positions = request.prompt_tokens + request.output_tokens + extra;
  if (positions > c.max_positions) {
    throw base::Error("--prompt " + std::to_string(request.prompt_tokens) + " plus --tokens " +
                      std::to_string(request.output_tokens) + (extra > 0 ? " plus gamma + 1" : "") +
                      " need " + std::to_string(positions) + " positions, more than model '" +
                      c.name + "' allows (max_positions " + std::to_string(c.max_positions) +
                      "; raise --max-positions)");
  }
  const int64_t sequences =
      request.workload == Workload::kBeam ? request.beam_width : request.batch;
  // Beam search holds its root cache and 2 x width - 1 more, allocated before its clock
  // (executor/generation.cc): a step's children beside the parents they copy.
  const double caches = (request.workload == Workload::kBeam ? 2.0 : 1.0) *
                        static_cast<double>(sequences);  // in double: --beam is unbounded
  const double kv_bytes = caches * static_cast<double>(positions) *
                          static_cast<double>(c.num_layers) * static_cast<double>(c.kv_width()) *
                          2.0 * sizeof(float);
  const double weight_bytes = WeightBytesFor(c);
  const double available = base::MemAvailableBytes();
  // Weights alone too large: AllocateWeights says so (before allocating) in its own words.
  if (available > 0 && weight_bytes <= 0.9 * available &&
      kv_bytes + weight_bytes > 0.9 * available) {
    throw base::Error(std::to_string(sequences) +
                      (request.workload == Workload::kBeam
                           ? " beams (2 x " + std::to_string(sequences) +
                                 " KV caches: the search's children beside their parents)"
                           : " sequences") +
                      " of " + std::to_string(positions) + " positions need " +
                      report::FormatBytes(kv_bytes) + " of KV cache (plus " +
                      report::FormatBytes(weight_bytes) + " of weights), more than the " +
                      report::FormatBytes(available) +
                      " this machine has available: lower --batch, --beam, --prompt or --tokens");
  }
}

ModelWeights LoadWeights(const ExecutorConfig& config, const std::string& path, uint64_t seed,
                         kernels::ThreadPool& pool) {
  if (path.empty()) return MakeSyntheticWeights(config, seed, pool);
  return LoadHuggingFaceWeights(config, path);
}

// The target's weights without its routed experts, which go to (or already are in) the expert
// store under the offload folder.
ModelWeights LoadOffloadedWeights(const ExecutorConfig& config, const RunRequest& request,
                                  kernels::ThreadPool& pool, offload::PreparedStore& store) {
  const std::filesystem::path dir = request.offload->offload_dir.empty()
                                        ? offload::DefaultOffloadDir()
                                        : request.offload->offload_dir;
  // Refused budgets, policies and models are refused before the store is built (minutes for a
  // large model); the CPU tier's expert is the store's payload.
  offload::PlanOffload(config, *request.offload,
                       offload::ExpertStoreKeyFor(config, "").payload_bytes(),
                       /*has_host_compute=*/false);
  ModelWeights weights;
  if (request.weights.empty()) {
    const ExpertSink skip;
    bool built = false;
    store = offload::PrepareExpertStore(
        config, "synthetic seed " + std::to_string(request.seed), dir,
        [&](offload::ExpertStoreWriter& writer) {
          const ExpertSink add = [&](int64_t layer, int64_t expert, const FfnWeights& w) {
            writer.Add(layer, expert, w);
          };
          weights = MakeSyntheticWeights(config, request.seed, pool, &add);
          built = true;
        });
    if (!built) weights = MakeSyntheticWeights(config, request.seed, pool, &skip);
    return weights;
  }
  // Real weights are loaded whole once (the store is built from them), then their experts dropped.
  weights = LoadHuggingFaceWeights(config, request.weights);
  std::error_code error;
  const auto size = std::filesystem::file_size(request.weights, error);
  const auto mtime =
      std::filesystem::last_write_time(request.weights, error).time_since_epoch().count();
  const std::string source = request.weights + " (" + std::to_string(size) + " bytes, mtime " +
                             std::to_string(mtime) + ")";
  store = offload::PrepareExpertStore(config, source, dir, [&](offload::ExpertStoreWriter& writer) {
    for (int64_t l = config.first_dense_layers; l < config.num_layers; ++l) {
      for (int64_t e = 0; e < config.num_experts; ++e)
        writer.Add(l - config.first_dense_layers, e, weights.layers[l].experts[e]);
    }
  });
  for (LayerWeights& layer : weights.layers) std::vector<FfnWeights>().swap(layer.experts);
  return weights;
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double sum = 0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

bool OnGpu(const RunRequest& request) { return request.device == "gpu"; }

}  // namespace

// The target's shape in the weight formats asked for, checked against the model's positions,
// this machine's memory and (--device gpu) the device before any weight is built.
ExecutorConfig RunTargetConfig(const RunRequest& request, const model::PresetStore& presets) {
  request.Validate();
  ExecutorConfig config = ExecutorConfigFromSpec(presets.LoadModel(request.model), request.shape);
  CheckRunFits(request, config);
  if (OnGpu(request)) {
    // Before building weights: without a GPU there is nothing to build them for.
    const std::string why_not = GpuUnavailableReason(request.gpu_index);
    if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  }
  config.expert_format = kernels::WeightFormatFromBits(request.expert_bits, "--expert-bits");
  config.attention_format =
      kernels::WeightFormatFromBits(request.attention_bits, "--attention-bits");
  return config;
}

namespace {

// The target model and what feeds it. Members are destroyed in reverse: the CPU offload runtime
// (its readers) first, then the model, then the timeline both wrote to.
struct TargetModel {
  std::unique_ptr<ExecutionTimeline> timeline;
  std::unique_ptr<ForwardModel> model;
  std::unique_ptr<offload::OffloadRuntime> runtime;  // --offload on --device cpu
  offload::OffloadRuntime* gpu_runtime = nullptr;    // --offload on --device gpu; the model owns it
};

TargetModel BuildTargetModel(const RunRequest& request, const ExecutorConfig& config,
                             const ModelWeights& weights, const offload::PreparedStore& store,
                             kernels::ThreadPool& pool) {
  TargetModel target;
  if (request.record_timeline) target.timeline = std::make_unique<ExecutionTimeline>();
  offload::OffloadOptions options;
  if (request.offload) {
    options = *request.offload;
    if (options.seed == 0) options.seed = request.seed;
  }
  if (OnGpu(request) && request.offload) {
    // Host -> GPU: the experts stay in RAM (the slow tier), the device caches them.
    target.model =
        MakeOffloadedGpuTransformer(weights, request.gpu_index, options, pool, &target.gpu_runtime);
  } else if (OnGpu(request)) {
    target.model = MakeGpuTransformer(weights, request.gpu_index);
  } else {
    auto cpu_model = std::make_unique<Transformer>(weights, pool);
    cpu_model->set_timeline(target.timeline.get());
    if (request.offload) {
      options.timeline = target.timeline.get();
      target.runtime = std::make_unique<offload::OffloadRuntime>(config, *store.store, options);
      cpu_model->set_expert_provider(target.runtime.get());
    }
    target.model = std::move(cpu_model);
  }
  return target;
}

// Where the target's tokens are routed (--routing; null source: the model's gate) and, for a MoE
// model, the trace it records.
struct RunRouting {
  std::unique_ptr<routing::RoutingSource> source;
  std::optional<routing::RoutingTrace> trace;

  std::string Describe() const { return source ? source->Describe() : "model gate"; }
  routing::RoutingTrace* record() { return trace ? &*trace : nullptr; }
};

RunRouting SetUpRouting(const RunRequest& request, const ExecutorConfig& config) {
  RunRouting routing;
  if (config.is_moe()) {
    const int64_t moe_layers = config.num_layers - config.first_dense_layers;
    routing.source = routing::MakeRoutingSource(request.routing, moe_layers, config.num_experts,
                                                config.top_k, request.seed);
    routing::RoutingTrace& trace = routing.trace.emplace();
    trace.num_layers = moe_layers;
    trace.num_experts = config.num_experts;
    trace.top_k = config.top_k;
    trace.source = "moelab run: model " + config.name + ", routing " + routing.Describe() +
                   ", seed " + std::to_string(request.seed);
  } else if (request.routing.kind != routing::RoutingSpec::Kind::kGate) {
    throw base::Error("--routing applies to MoE models; '" + config.name + "' is dense");
  } else if (request.trace_requested) {
    throw base::Error("--trace-out records expert routing; model '" + config.name + "' is dense");
  }
  return routing;
}

}  // namespace

ModelWeights LoadRunWeights(const ExecutorConfig& config, const RunRequest& request,
                            kernels::ThreadPool& pool, offload::PreparedStore& store) {
  return request.offload && !OnGpu(request)
             ? LoadOffloadedWeights(config, request, pool, store)
             : LoadWeights(config, request.weights, request.seed, pool);
}

std::unique_ptr<ForwardModel> BuildRunModel(const RunRequest& request, const ExecutorConfig& config,
                                            const ModelWeights& weights,
                                            const offload::PreparedStore& store,
                                            kernels::ThreadPool& pool,
                                            std::unique_ptr<offload::OffloadRuntime>& runtime) {
  TargetModel target = BuildTargetModel(request, config, weights, store, pool);
  runtime = std::move(target.runtime);
  return std::move(target.model);
}

RunMachine RunMachineOf(const RunRequest& request, const kernels::ThreadPool& pool) {
  RunMachine machine;
  machine.cpu = kernels::CpuModelName();
  machine.isa = ToString(kernels::ActiveIsa());
  machine.quantized_kernel = ToString(kernels::ActiveQuantizedKernel());
  machine.threads = pool.size();
  if (OnGpu(request)) {
    const device::GpuInventory inventory = device::DetectGpus();
    machine.gpu = inventory.devices.at(static_cast<size_t>(request.gpu_index));
    machine.cuda_runtime = inventory.runtime_version;
    machine.driver = inventory.driver_version;
  }
  return machine;
}

namespace {

// What the run is, before it runs: the machine, the model, the request's sizes.
RunResult DescribeRun(const RunRequest& request, const ExecutorConfig& config,
                      const ModelWeights& weights, const kernels::ThreadPool& pool,
                      const ForwardModel& target, const RunRouting& routing) {
  RunResult result;
  result.workload = request.workload;
  result.machine = RunMachineOf(request, pool);
  result.device = target.device();
  result.model = {config, weights.source, weights.TotalBytes()};
  result.batch = request.batch;
  result.prompt_tokens = request.prompt_tokens;
  result.output_tokens = request.output_tokens;
  result.seed = request.seed;
  result.routing = routing.Describe();
  result.weight_bytes_per_token = weights.BytesPerToken();
  if (request.offload && !OnGpu(request)) {
    // The experts are not in ModelWeights: count them as the in-RAM run does.
    result.model.weight_bytes = WeightBytesFor(config);
    FfnWeights expert;
    expert.Allocate(config.hidden_size, config.expert_intermediate_size, config.expert_format);
    result.weight_bytes_per_token =
        weights.BytesPerToken() +
        static_cast<double>((config.num_layers - config.first_dense_layers) * config.top_k) *
            expert.StoredBytes();
  }
  return result;
}

// What every workload runs with.
struct WorkloadContext {
  const RunRequest& request;
  const model::PresetStore& presets;
  const ExecutorConfig& config;
  const ModelWeights& weights;
  kernels::ThreadPool& pool;
  ForwardModel& target;
  const std::vector<TokenIds>& prompts;
  DecodeOptions decode;  // the request's tokens, temperature, seed, routing and trace
};

// TTFT, TPOT, tokens/s and the decode's weight bandwidth of a decode-like workload.
void SetDecodeMetrics(const WorkloadContext& w, double prefill_s, double decode_s,
                      RunResult& result) {
  const double later_tokens = static_cast<double>(w.request.output_tokens - 1);
  result.ttft_s = prefill_s;
  if (later_tokens > 0) {
    result.tpot_s = decode_s / later_tokens;
    result.tokens_per_s = static_cast<double>(w.request.batch) * later_tokens / decode_s;
    // Weight bytes one decode step reads divided by its time (meaningful at batch 1).
    result.decode_weight_bandwidth_bytes_per_s =
        w.weights.BytesPerToken() / (decode_s / later_tokens);
  }
}

void RunPrefillWorkload(const WorkloadContext& w, RunResult& result) {
  DecodeOptions options = w.decode;
  options.output_tokens = 0;
  const DecodeResult run = RunDecode(w.target, w.prompts, options);
  result.ttft_s = run.prefill_s;
  result.tokens_per_s = static_cast<double>(w.request.batch) *
                        static_cast<double>(w.request.prompt_tokens) / run.prefill_s;
  result.step_times = run.steps;
}

void RunDecodeWorkload(const WorkloadContext& w, RunResult& result) {
  const DecodeResult run = RunDecode(w.target, w.prompts, w.decode);
  SetDecodeMetrics(w, run.prefill_s, run.decode_s, result);
  result.step_times = run.steps;
  result.outputs = run.outputs;
}

void RunBeamWorkload(const WorkloadContext& w, RunResult& result) {
  const BeamResult run = RunBeamSearch(w.target, w.prompts[0], w.request.beam_width,
                                       w.request.output_tokens, w.decode.routing, w.decode.record);
  const double later_tokens = static_cast<double>(w.request.output_tokens - 1);
  result.ttft_s = run.prefill_s;
  if (later_tokens > 0) {
    result.tpot_s = run.decode_s / later_tokens;
    result.tokens_per_s = later_tokens / run.decode_s;
  }
  result.beam_width = w.request.beam_width;
  result.beam_selection_s = run.selection_s;
  result.step_times = run.steps;
  result.beams = run.beams;
}

// The SD statistics, against the plain decode of the same requests (`baseline`).
RunSdStats SdStats(const RunRequest& request, const DecodeResult& baseline,
                   const OperatorTimes& baseline_times, const SpeculativeResult& sd,
                   const OperatorTimes& draft_times) {
  const double later_tokens = static_cast<double>(request.output_tokens - 1);
  std::vector<double> baseline_steps;
  for (const StepTime& s : baseline.steps) {
    if (s.kind == "decode") baseline_steps.push_back(s.seconds);
  }
  RunSdStats stats;
  stats.gamma = request.gamma;
  stats.acceptance = request.acceptance;
  stats.rounds = sd.rounds;
  for (int64_t a = 0; a <= request.gamma; ++a) {
    int64_t count = 0;
    for (int64_t accepted : sd.accepted_per_round) count += accepted == a;
    stats.accepted_histogram.push_back(count);
  }
  stats.sigma = sd.Sigma(request.gamma);
  stats.speedup = baseline.decode_s / sd.decode_s;
  stats.target_efficiency = Mean(baseline_steps) / Mean(sd.full_batch_verify_s);
  stats.draft_s = sd.draft_s;
  stats.verify_s = sd.verify_s;
  stats.baseline_decode_s = baseline.decode_s;
  stats.baseline_tpot_s = later_tokens > 0 ? baseline.decode_s / later_tokens : 0.0;
  stats.baseline_operator_times = baseline_times;
  stats.draft_operator_times = draft_times;
  if (request.acceptance == Acceptance::kTargetAlpha)
    stats.reference_mismatches = sd.reference_mismatches;
  if (IsFixedRate(request.acceptance)) {
    stats.alpha = request.alpha;
    stats.sigma_expected = model::AcceptedLengthFraction(request.alpha, request.gamma);
  }
  return stats;
}

SpeculativeOptions SdOptions(const WorkloadContext& w) {
  SpeculativeOptions options;
  options.gamma = w.request.gamma;
  options.acceptance = w.request.acceptance;
  options.alpha = w.request.alpha;
  options.temperature = w.request.temperature > 0 ? w.request.temperature : 1.0;
  options.output_tokens = w.request.output_tokens;
  options.seed = w.request.seed;
  options.routing = w.decode.routing;
  options.record = w.decode.record;
  return options;
}

void RunSpeculativeWorkload(const WorkloadContext& w, RunResult& result) {
  model::ShapeOverrides draft_shape = w.request.draft_shape;
  if (!draft_shape.vocab) draft_shape.vocab = w.config.vocab_size;
  const ExecutorConfig draft_config =
      ExecutorConfigFromSpec(w.presets.LoadModel(w.request.draft), draft_shape);
  const ModelWeights draft_weights =
      LoadWeights(draft_config, w.request.draft_weights, w.request.seed + 1, w.pool);
  std::unique_ptr<ForwardModel> draft =
      OnGpu(w.request)
          ? MakeGpuTransformer(draft_weights, w.request.gpu_index)
          : std::unique_ptr<ForwardModel>(std::make_unique<Transformer>(draft_weights, w.pool));
  result.draft = RunModel{draft_config, draft_weights.source, draft_weights.TotalBytes()};
  // The plain decode of the same requests, in the same run, is the speedup's reference.
  DecodeOptions baseline_options = w.decode;
  baseline_options.temperature = 0;
  baseline_options.record = nullptr;
  const DecodeResult baseline = RunDecode(w.target, w.prompts, baseline_options);
  const OperatorTimes baseline_times = w.target.times();
  w.target.times() = OperatorTimes{};
  const SpeculativeResult sd = RunSpeculative(w.target, *draft, w.prompts, SdOptions(w));
  SetDecodeMetrics(w, sd.prefill_s, sd.decode_s, result);
  result.step_times = sd.steps;
  result.outputs = sd.outputs;
  result.sd = SdStats(w.request, baseline, baseline_times, sd, draft->times());
}

void RunTheWorkload(const WorkloadContext& w, RunResult& result) {
  switch (w.request.workload) {
    case Workload::kPrefill:
      return RunPrefillWorkload(w, result);
    case Workload::kDecode:
      return RunDecodeWorkload(w, result);
    case Workload::kBeam:
      return RunBeamWorkload(w, result);
    case Workload::kSpeculative:
      return RunSpeculativeWorkload(w, result);
  }
}

// What the run leaves behind once the workload ended: the target's operator times, the offload
// runtime's counters, the recorded routing and timeline.
void FinishRun(TargetModel& target, const offload::PreparedStore& store, RunRouting& routing,
               RunResult& result) {
  result.operator_times = target.model->times();
  if (target.gpu_runtime) result.offload = target.gpu_runtime->Stats();
  if (target.runtime) {
    offload::OffloadStats stats = target.runtime->Stats();
    stats.store_reused = store.reused;
    stats.store_build_s = store.build_s;
    result.offload = std::move(stats);
  }
  result.trace = std::move(routing.trace);
  if (target.timeline) {
    const int threads = result.machine.threads;
    result.timeline_json =
        target.timeline->TraceJson(result.machine.cpu + " (" + std::to_string(threads) +
                                   (threads == 1 ? " thread)" : " threads)"));
  }
}

}  // namespace

void RunRequest::Validate() const {
  if (batch < 1) throw base::Error("--batch must be at least 1, got " + std::to_string(batch));
  kernels::WeightFormatFromBits(expert_bits,
                                "--expert-bits");  // refuses widths the executor has no kernels for
  kernels::WeightFormatFromBits(attention_bits, "--attention-bits");
  if (prompt_tokens < 1)
    throw base::Error("--prompt must be at least 1 token, got " + std::to_string(prompt_tokens));
  if (output_tokens < 1)
    throw base::Error("--tokens must be at least 1, got " + std::to_string(output_tokens));
  // Each within the largest KV cache an executor model can have, so that their sum (checked
  // against the model's max_positions before any weight is built) cannot overflow: a prompt of
  // 2^63 tokens wrapped past that check and generated prompts until memory ran out.
  for (const auto& [flag, count] :
       {std::pair{"--prompt", prompt_tokens}, std::pair{"--tokens", output_tokens}}) {
    if (count > model::kMaxExecutorPositions)
      throw base::Error(std::string(flag) + " " + std::to_string(count) +
                        " is more than any executor model's positions (at most " +
                        std::to_string(model::kMaxExecutorPositions) + ", the largest " +
                        "--max-positions)");
  }
  if (workload == Workload::kBeam) {
    if (beam_width < 1)
      throw base::Error("--beam must be at least 1, got " + std::to_string(beam_width));
    if (batch != 1)
      throw base::Error(
          "--workload beam searches one prompt: --batch must be 1 (use --beam for the width)");
  }
  if (gamma < 1) throw base::Error("--gamma must be at least 1, got " + std::to_string(gamma));
  if (!(alpha >= 0 && alpha < 1))
    throw base::Error("--alpha must be in [0, 1), got " + std::to_string(alpha));
  if (!(temperature >= 0)) throw base::Error("--temperature must be >= 0");
  if (device != "cpu" && device != "gpu")
    throw base::Error("--device must be cpu or gpu, got '" + device + "'");
  if (device == "gpu" && record_timeline) {
    throw base::Error(
        "--timeline-out records the CPU executor's threads; --device gpu has no "
        "timeline yet");
  }
  if (device == "gpu" && attention_bits != 16) {
    throw base::Error(
        "--device gpu runs bf16 attention: --attention-bits must be 16 (the GPU backend quantizes "
        "routed experts only: --expert-bits 8 or 4)");
  }
  if (device == "gpu" && offload && expert_bits != 16) {
    throw base::Error(
        "--device gpu --offload moves bf16 experts: --expert-bits must be 16 (quantized experts "
        "run on the GPU only when they are all in its memory)");
  }
  if (threads < 0) throw base::Error("--threads must be >= 1");
  if (threads > kMaxThreads) {
    throw base::Error(
        "--threads " + std::to_string(threads) + " is above the limit of " +
        std::to_string(kMaxThreads) + " (the pool starts one OS thread each; this machine has " +
        std::to_string(std::thread::hardware_concurrency()) + " hardware threads; docs/limits.md)");
  }
  // Its bounds (--offload-readers) before any weight is built, not when the runtime starts.
  if (offload) offload->Validate();
}

RunResult RunWorkload(const RunRequest& request, const model::PresetStore& presets) {
  const ExecutorConfig config = RunTargetConfig(request, presets);
  kernels::ThreadPool pool(request.threads > 0 ? request.threads : kernels::DefaultThreadCount());
  offload::PreparedStore store;
  const ModelWeights weights = LoadRunWeights(config, request, pool, store);
  TargetModel target = BuildTargetModel(request, config, weights, store, pool);
  RunRouting routing = SetUpRouting(request, config);
  const std::vector<TokenIds> prompts =
      SyntheticPrompts(request.batch, request.prompt_tokens, config.vocab_size, request.seed);
  RunResult result = DescribeRun(request, config, weights, pool, *target.model, routing);
  DecodeOptions decode;
  decode.output_tokens = request.output_tokens;
  decode.temperature = request.temperature;
  decode.seed = request.seed;
  decode.routing = routing.source.get();
  decode.record = routing.record();
  RunTheWorkload(
      WorkloadContext{request, presets, config, weights, pool, *target.model, prompts, decode},
      result);
  FinishRun(target, store, routing, result);
  return result;
}

}  // namespace moelab::executor
