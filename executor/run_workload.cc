#include "executor/run_workload.h"

#include <chrono>
#include <memory>
#include <thread>

#include "device/gpu_devices.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/hf_weights.h"
#include "executor/transformer.h"
#include "kernels/cpu_features.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/system_memory.h"
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
  const double kv_bytes = static_cast<double>(sequences) * static_cast<double>(positions) *
                          static_cast<double>(c.num_layers) * static_cast<double>(c.kv_width()) *
                          2.0 * sizeof(float);
  const double weight_bytes = WeightBytesFor(c);
  const double available = base::MemAvailableBytes();
  // Weights alone too large: AllocateWeights says so (before allocating) in its own words.
  if (available > 0 && weight_bytes <= 0.9 * available &&
      kv_bytes + weight_bytes > 0.9 * available) {
    throw base::Error(
        std::to_string(sequences) +
        (request.workload == Workload::kBeam ? " beams" : " sequences") + " of " +
        std::to_string(positions) + " positions need " +
        std::to_string(static_cast<int64_t>(kv_bytes / 1e9)) + " GB of KV cache (plus " +
        std::to_string(static_cast<int64_t>(weight_bytes / 1e9)) +
        " GB of weights), more than the " + std::to_string(static_cast<int64_t>(available / 1e9)) +
        " GB this machine has available: lower --batch, --beam, --prompt or --tokens");
  }
}

nlohmann::json ShapeJson(const ExecutorConfig& c, const ModelWeights& w) {
  nlohmann::json json = {{"name", c.name},
                         {"family", c.family},
                         {"layers", c.num_layers},
                         {"hidden", c.hidden_size},
                         {"heads", c.num_heads},
                         {"kv_heads", c.num_kv_heads},
                         {"head_dim", c.head_dim},
                         {"vocab", c.vocab_size},
                         {"weights_source", w.source},
                         {"weight_bytes", w.TotalBytes()},
                         {"expert_format", ToString(c.expert_format)},
                         {"attention_format", ToString(c.attention_format)}};
  if (c.is_moe()) {
    json["experts"] = c.num_experts;
    json["top_k"] = c.top_k;
    json["expert_intermediate"] = c.expert_intermediate_size;
    json["expert_bytes"] =
        3.0 * static_cast<double>(c.hidden_size * c.expert_intermediate_size) * 2.0;
    json["shared_experts"] = c.num_shared_experts;
  } else {
    json["intermediate"] = c.dense_intermediate_size;
  }
  return json;
}

nlohmann::json StepsJson(const std::vector<StepTime>& steps) {
  nlohmann::json json = nlohmann::json::array();
  for (const StepTime& s : steps)
    json.push_back({{"kind", s.kind},
                    {"tokens", s.tokens},
                    {"positions", s.positions},
                    {"seconds", s.seconds}});
  return json;
}

nlohmann::json OperatorJson(const OperatorTimes& t) {
  return {{"attention", t.attention_s}, {"router", t.router_s}, {"experts", t.experts_s},
          {"lm_head", t.lm_head_s},     {"other", t.other_s},   {"total", t.total()}};
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
  if (!config.is_moe())
    throw base::Error("--offload moves routed experts; model '" + config.name + "' is dense");
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

}  // namespace

std::string ToString(Workload workload) {
  switch (workload) {
    case Workload::kPrefill:
      return "prefill";
    case Workload::kDecode:
      return "decode";
    case Workload::kBeam:
      return "beam";
    case Workload::kSpeculative:
      return "sd";
  }
  return "?";
}

Workload WorkloadFromString(const std::string& name) {
  if (name == "prefill") return Workload::kPrefill;
  if (name == "decode") return Workload::kDecode;
  if (name == "beam") return Workload::kBeam;
  if (name == "sd") return Workload::kSpeculative;
  throw base::Error("unknown workload '" + name + "': expected prefill, decode, beam or sd");
}

void RunRequest::Validate() const {
  if (batch < 1) throw base::Error("--batch must be at least 1, got " + std::to_string(batch));
  kernels::WeightFormatFromBits(expert_bits,
                                "--expert-bits");  // refuses widths the executor has no kernels for
  kernels::WeightFormatFromBits(attention_bits, "--attention-bits");
  if (prompt_tokens < 1)
    throw base::Error("--prompt must be at least 1 token, got " + std::to_string(prompt_tokens));
  if (output_tokens < 1)
    throw base::Error("--tokens must be at least 1, got " + std::to_string(output_tokens));
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
  if (device == "gpu" && !timeline_out.empty()) {
    throw base::Error(
        "--timeline-out records the CPU executor's threads; --device gpu has no "
        "timeline yet");
  }
  if (device == "gpu" && (expert_bits != 16 || attention_bits != 16)) {
    throw base::Error(
        "--device gpu runs bf16 weights: --expert-bits and --attention-bits must "
        "be 16 (the GPU backend has no quantized kernels yet)");
  }
  if (threads < 0) throw base::Error("--threads must be >= 1");
  if (threads > kMaxThreads) {
    throw base::Error(
        "--threads " + std::to_string(threads) + " is above the limit of " +
        std::to_string(kMaxThreads) + " (the pool starts one OS thread each; this machine has " +
        std::to_string(std::thread::hardware_concurrency()) + " hardware threads; docs/limits.md)");
  }
}

ShapeOverrides DefaultTargetShape() {
  ShapeOverrides s;
  s.layers = 8;
  s.hidden = 1024;
  s.intermediate = 3584;
  s.heads = 16;
  s.kv_heads = 4;
  s.head_dim = 64;
  s.max_positions = 4096;
  return s;
}

ShapeOverrides DefaultDraftShape() {
  ShapeOverrides s;
  s.layers = 4;
  s.hidden = 512;
  s.dense_intermediate = 1536;
  s.heads = 8;
  s.kv_heads = 2;
  s.head_dim = 64;
  s.max_positions = 4096;
  return s;
}

nlohmann::json RunWorkload(const RunRequest& request, const model::PresetStore& presets) {
  request.Validate();
  ExecutorConfig target_config =
      ExecutorConfigFromSpec(presets.LoadModel(request.model), request.shape);
  CheckRunFits(request, target_config);
  if (request.device == "gpu") {
    // Before building weights: without a GPU there is nothing to build them for.
    const std::string why_not = GpuUnavailableReason(request.gpu_index);
    if (!why_not.empty()) throw base::Error("--device gpu: " + why_not);
  }
  kernels::ThreadPool pool(request.threads > 0 ? request.threads : kernels::DefaultThreadCount());
  target_config.expert_format = kernels::WeightFormatFromBits(request.expert_bits, "--expert-bits");
  target_config.attention_format =
      kernels::WeightFormatFromBits(request.attention_bits, "--attention-bits");
  offload::PreparedStore store;
  const ModelWeights target_weights =
      request.offload && request.device != "gpu"
          ? LoadOffloadedWeights(target_config, request, pool, store)
          : LoadWeights(target_config, request.weights, request.seed, pool);
  const bool on_gpu = request.device == "gpu";
  std::unique_ptr<ExecutionTimeline> timeline;
  if (!request.timeline_out.empty()) timeline = std::make_unique<ExecutionTimeline>();
  std::unique_ptr<ForwardModel> target_model;
  std::unique_ptr<offload::OffloadRuntime> runtime;
  offload::OffloadRuntime* gpu_runtime = nullptr;  // owned by the GPU model
  if (on_gpu && request.offload) {
    // Host -> GPU: the experts stay in RAM (the slow tier), the device caches them.
    offload::OffloadOptions options = *request.offload;
    if (options.seed == 0) options.seed = request.seed;
    target_model =
        MakeOffloadedGpuTransformer(target_weights, request.gpu_index, options, pool, &gpu_runtime);
  } else if (on_gpu) {
    target_model = MakeGpuTransformer(target_weights, request.gpu_index);
  } else {
    auto cpu_model = std::make_unique<Transformer>(target_weights, pool);
    cpu_model->set_timeline(timeline.get());
    if (request.offload) {
      offload::OffloadOptions options = *request.offload;
      if (options.seed == 0) options.seed = request.seed;
      options.timeline = timeline.get();
      runtime = std::make_unique<offload::OffloadRuntime>(target_config, *store.store, options);
      cpu_model->set_expert_provider(runtime.get());
    }
    target_model = std::move(cpu_model);
  }
  ForwardModel& target = *target_model;

  std::unique_ptr<routing::RoutingSource> routing;
  routing::RoutingTrace trace;
  if (target_config.is_moe()) {
    const int64_t moe_layers = target_config.num_layers - target_config.first_dense_layers;
    routing = routing::MakeRoutingSource(request.routing, moe_layers, target_config.num_experts,
                                         target_config.top_k, request.seed);
    trace.num_layers = moe_layers;
    trace.num_experts = target_config.num_experts;
    trace.top_k = target_config.top_k;
    trace.source = "moelab run: model " + target_config.name + ", routing " +
                   (routing ? routing->Describe() : std::string("model gate")) + ", seed " +
                   std::to_string(request.seed);
  } else if (request.routing.kind != routing::RoutingSpec::Kind::kGate) {
    throw base::Error("--routing applies to MoE models; '" + target_config.name + "' is dense");
  } else if (!request.trace_out.empty()) {
    throw base::Error("--trace-out records expert routing; model '" + target_config.name +
                      "' is dense");
  }
  routing::RoutingTrace* record = target_config.is_moe() ? &trace : nullptr;

  const std::vector<TokenIds> prompts = SyntheticPrompts(request.batch, request.prompt_tokens,
                                                         target_config.vocab_size, request.seed);
  nlohmann::json report;
  report["schema"] = "moelab.run/1";
  report["workload"] = ToString(request.workload);
  report["machine"] = {{"cpu", kernels::CpuModelName()},
                       {"isa", ToString(kernels::ActiveIsa())},
                       {"quantized_kernel", ToString(kernels::ActiveQuantizedKernel())},
                       {"threads", pool.size()}};
  report["device"] = target.device();
  if (on_gpu) {
    const device::GpuInventory inventory = device::DetectGpus();
    const device::GpuDevice& gpu = inventory.devices.at(static_cast<size_t>(request.gpu_index));
    report["machine"]["gpu"] = {
        {"index", gpu.index},
        {"name", gpu.name},
        {"memory_bytes", gpu.memory_bytes},
        {"compute_capability", std::to_string(gpu.compute_capability_major) + "." +
                                   std::to_string(gpu.compute_capability_minor)},
        {"cuda_runtime", inventory.runtime_version},
        {"driver", inventory.driver_version}};
  }
  report["model"] = ShapeJson(target_config, target_weights);
  report["batch"] = request.batch;
  report["prompt_tokens"] = request.prompt_tokens;
  report["output_tokens"] = request.output_tokens;
  report["seed"] = request.seed;
  report["routing"] = routing ? routing->Describe() : "model gate";
  report["weight_bytes_per_token"] = target_weights.BytesPerToken();
  if (request.offload && !on_gpu) {
    // The experts are not in ModelWeights: count them as the in-RAM run does.
    report["model"]["weight_bytes"] = WeightBytesFor(target_config);
    FfnWeights expert;
    expert.Allocate(target_config.hidden_size, target_config.expert_intermediate_size,
                    target_config.expert_format);
    report["weight_bytes_per_token"] =
        target_weights.BytesPerToken() +
        static_cast<double>((target_config.num_layers - target_config.first_dense_layers) *
                            target_config.top_k) *
            expert.StoredBytes();
  }

  const double batch = static_cast<double>(request.batch);
  const double later_tokens = static_cast<double>(request.output_tokens - 1);
  auto decode_metrics = [&](double prefill_s, double decode_s) {
    report["ttft_s"] = prefill_s;
    report["tpot_s"] =
        later_tokens > 0 ? nlohmann::json(decode_s / later_tokens) : nlohmann::json(nullptr);
    report["tokens_per_s"] = later_tokens > 0 ? nlohmann::json(batch * later_tokens / decode_s)
                                              : nlohmann::json(nullptr);
    if (later_tokens > 0) {
      // Weight bytes one decode step reads divided by its time (meaningful at batch 1).
      report["decode_weight_bandwidth_bytes_per_s"] =
          target_weights.BytesPerToken() / (decode_s / later_tokens);
    }
  };

  DecodeOptions decode_options;
  decode_options.output_tokens = request.output_tokens;
  decode_options.temperature = request.temperature;
  decode_options.seed = request.seed;
  decode_options.routing = routing.get();
  decode_options.record = record;
  switch (request.workload) {
    case Workload::kPrefill: {
      decode_options.output_tokens = 0;
      const DecodeResult result = RunDecode(target, prompts, decode_options);
      report["ttft_s"] = result.prefill_s;
      report["tpot_s"] = nullptr;
      report["tokens_per_s"] =
          batch * static_cast<double>(request.prompt_tokens) / result.prefill_s;
      report["step_times"] = StepsJson(result.steps);
      break;
    }
    case Workload::kDecode: {
      const DecodeResult result = RunDecode(target, prompts, decode_options);
      decode_metrics(result.prefill_s, result.decode_s);
      report["step_times"] = StepsJson(result.steps);
      report["outputs"] = result.outputs;
      break;
    }
    case Workload::kBeam: {
      const BeamResult result = RunBeamSearch(target, prompts[0], request.beam_width,
                                              request.output_tokens, routing.get(), record);
      report["ttft_s"] = result.prefill_s;
      report["tpot_s"] = later_tokens > 0 ? nlohmann::json(result.decode_s / later_tokens)
                                          : nlohmann::json(nullptr);
      report["tokens_per_s"] = later_tokens > 0 ? nlohmann::json(later_tokens / result.decode_s)
                                                : nlohmann::json(nullptr);
      report["beam_width"] = request.beam_width;
      report["step_times"] = StepsJson(result.steps);
      nlohmann::json beams = nlohmann::json::array();
      for (const Beam& b : result.beams)
        beams.push_back({{"tokens", b.tokens}, {"log_probability", b.log_probability}});
      report["beams"] = beams;
      break;
    }
    case Workload::kSpeculative: {
      ExecutorConfig draft_config;
      {
        ShapeOverrides draft_shape = request.draft_shape;
        if (!draft_shape.vocab) draft_shape.vocab = target_config.vocab_size;
        draft_config = ExecutorConfigFromSpec(presets.LoadModel(request.draft), draft_shape);
      }
      const ModelWeights draft_weights =
          LoadWeights(draft_config, request.draft_weights, request.seed + 1, pool);
      std::unique_ptr<ForwardModel> draft_model =
          on_gpu
              ? MakeGpuTransformer(draft_weights, request.gpu_index)
              : std::unique_ptr<ForwardModel>(std::make_unique<Transformer>(draft_weights, pool));
      ForwardModel& draft = *draft_model;
      report["draft"] = ShapeJson(draft_config, draft_weights);
      // The plain decode of the same requests, in the same run, is the speedup's reference.
      DecodeOptions baseline_options = decode_options;
      baseline_options.temperature = 0;
      baseline_options.record = nullptr;
      const DecodeResult baseline = RunDecode(target, prompts, baseline_options);
      const OperatorTimes baseline_times = target.times();
      target.times() = OperatorTimes{};
      SpeculativeOptions options;
      options.gamma = request.gamma;
      options.acceptance = request.acceptance;
      options.alpha = request.alpha;
      options.temperature = request.temperature > 0 ? request.temperature : 1.0;
      options.output_tokens = request.output_tokens;
      options.seed = request.seed;
      options.routing = routing.get();
      options.record = record;
      const SpeculativeResult sd = RunSpeculative(target, draft, prompts, options);
      decode_metrics(sd.prefill_s, sd.decode_s);
      report["step_times"] = StepsJson(sd.steps);
      report["outputs"] = sd.outputs;
      std::vector<double> baseline_steps;
      for (const StepTime& s : baseline.steps) {
        if (s.kind == "decode") baseline_steps.push_back(s.seconds);
      }
      nlohmann::json histogram = nlohmann::json::array();
      for (int64_t a = 0; a <= request.gamma; ++a) {
        int64_t count = 0;
        for (int64_t accepted : sd.accepted_per_round) count += accepted == a;
        histogram.push_back(count);
      }
      nlohmann::json sd_json = {
          {"gamma", request.gamma},
          {"acceptance", ToString(request.acceptance)},
          {"rounds", sd.rounds},
          {"accepted_histogram", histogram},
          {"sigma", sd.Sigma(request.gamma)},
          {"speedup", baseline.decode_s / sd.decode_s},
          {"target_efficiency", Mean(baseline_steps) / Mean(sd.full_batch_verify_s)},
          {"draft_s", sd.draft_s},
          {"verify_s", sd.verify_s},
          {"baseline",
           {{"decode_s", baseline.decode_s},
            {"tpot_s", later_tokens > 0 ? baseline.decode_s / later_tokens : 0.0},
            {"operator_times_s", OperatorJson(baseline_times)}}},
          {"draft_operator_times_s", OperatorJson(draft.times())}};
      if (request.acceptance == Acceptance::kTargetAlpha)
        sd_json["reference_mismatches"] = sd.reference_mismatches;
      if (IsFixedRate(request.acceptance)) {
        sd_json["alpha"] = request.alpha;
        sd_json["sigma_expected"] = model::AcceptedLengthFraction(request.alpha, request.gamma);
      }
      report["sd"] = sd_json;
      break;
    }
  }
  report["operator_times_s"] = OperatorJson(target.times());
  if (gpu_runtime) report["offload"] = gpu_runtime->Stats().ToJson();
  if (runtime) {
    offload::OffloadStats stats = runtime->Stats();
    stats.store_reused = store.reused;
    stats.store_build_s = store.build_s;
    report["offload"] = stats.ToJson();
  }
  if (record) {
    nlohmann::json counts = nlohmann::json::array();
    for (size_t step = 0; step < trace.steps.size(); ++step)
      counts.push_back(trace.ExpertCounts(step));
    report["expert_token_counts"] = counts;
    if (!request.trace_out.empty()) routing::SaveRoutingTrace(trace, request.trace_out);
  }
  if (timeline) {
    base::WriteFileAtomically(
        request.timeline_out,
        timeline->TraceJson(kernels::CpuModelName() + " (" + std::to_string(pool.size()) +
                            (pool.size() == 1 ? " thread)" : " threads)")));
  }
  return report;
}

}  // namespace moelab::executor
