#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "executor/run_report.h"
#include "executor/run_workload.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/units.h"
#include "policies/registry.h"
#include "sim/calibration.h"

namespace moelab::cli {
namespace {

int Run(const std::vector<std::string>& args) {
  po::options_description options("moelab run");
  const executor::RunRequest defaults;
  options.add_options()("model", po::value<std::string>()->default_value(defaults.model),
                        "target model preset or path (shape overrides below apply)")(
      "weights", po::value<std::string>()->default_value(""),
      "Hugging Face safetensors file or folder for the target (default: seeded synthetic weights)")(
      "expert-bits", po::value<int>()->default_value(defaults.expert_bits),
      "routed expert weights: 16 (bf16), 8 (q8_0) or 4 (q4_0); bf16 inputs are quantized at load")(
      "attention-bits", po::value<int>()->default_value(defaults.attention_bits),
      "attention q|k|v and o weights: 16, 8 or 4 bits, as --expert-bits")(
      "draft", po::value<std::string>()->default_value(defaults.draft),
      "draft model for --workload sd")("draft-weights", po::value<std::string>()->default_value(""),
                                       "safetensors for the draft (default: synthetic)")(
      "workload", po::value<std::string>()->default_value("decode"),
      "prefill | decode | beam | sd")("batch", po::value<int64_t>()->default_value(defaults.batch),
                                      "sequences decoded together")(
      "prompt", po::value<int64_t>()->default_value(defaults.prompt_tokens),
      "prompt tokens per sequence (seeded synthetic prompts)")(
      "tokens", po::value<int64_t>()->default_value(defaults.output_tokens),
      "output tokens per sequence")("beam",
                                    po::value<int64_t>()->default_value(defaults.beam_width),
                                    "beam width for --workload beam")(
      "gamma", po::value<int64_t>()->default_value(defaults.gamma), "draft tokens per SD round")(
      "acceptance", po::value<std::string>()->default_value("alpha"),
      "SD acceptance: alpha (fixed rate, for synthetic weights) | greedy | sampling")(
      "alpha", po::value<std::string>()->default_value("0.8"),
      "acceptance rate for --acceptance alpha, [0, 1)")(
      "temperature", po::value<std::string>()->default_value("0"),
      "sampling temperature (0: greedy decode; rejection sampling uses 1 when 0)")(
      "routing", po::value<std::string>()->default_value("gate"),
      "gate | uniform | popularity:FILE | trace:FILE")(
      "seed", po::value<uint64_t>()->default_value(defaults.seed),
      "seed for weights, prompts, sampling and routing")(
      "threads", po::value<int>()->default_value(0),
      "threads (default: MOELAB_THREADS or all cores)")(
      "trace-out", po::value<std::string>()->default_value(""),
      "write the routing trace (moelab.routing_trace/1) here")(
      "offload", po::value<std::string>(),
      "offload routed experts to storage with this policy (on-demand, lru-prefetch, static-split, "
      "fmoe, stream-all); needs --expert-memory")(
      "expert-memory", po::value<std::string>(),
      "RAM for the expert cache and staging buffers with --offload (bytes, or with a unit: 512MB, "
      "2GiB)")("offload-dir", po::value<std::string>(),
               "folder of the expert store with --offload (default $MOELAB_OFFLOAD_DIR, else "
               "$XDG_CACHE_HOME/moelab/experts, else ~/.cache/moelab/experts)")(
      "offload-readers", po::value<int>()->default_value(2),
      "asynchronous expert reads in flight with --offload")(
      "offload-calibration", po::value<std::string>(),
      "routing the policy calibrates on before the first token with --offload (popularity, fMoE's "
      "expert maps), as sim offload calibrates on its --routing (e.g. trace:FILE; default none: "
      "flat popularity, no history)");
  // Policy options as in sim offload, one flag per option the registry declares.
  const std::vector<policies::PolicyOptionFlag> policy_flags =
      policies::PolicyOptionFlags(policies::DefaultPolicyRegistry());
  for (const policies::PolicyOptionFlag& flag : policy_flags)
    options.add_options()(flag.name.c_str(), po::value<int64_t>(), flag.help.c_str());
  AddOutputOptions(options);
  po::options_description shape(
      "target shape (defaults: Mixtral-8x7B scaled to 1.6 GB, docs/executor.md)");
  AddShapeOptions(shape, "", executor::DefaultTargetShape());
  po::options_description draft_shape("draft shape");
  AddShapeOptions(draft_shape, "draft-", executor::DefaultDraftShape());
  options.add(shape).add(draft_shape);
  po::variables_map values;
  if (!ParseOptions("usage: moelab run --model M [shape overrides] --workload "
                    "prefill|decode|beam|sd --batch B --prompt N "
                    "--tokens M [--beam W] [--draft D --gamma G --alpha A] [--routing R] --seed S "
                    "[--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  executor::RunRequest request;
  request.model = values["model"].as<std::string>();
  request.weights = values["weights"].as<std::string>();
  request.expert_bits = values["expert-bits"].as<int>();
  request.attention_bits = values["attention-bits"].as<int>();
  // A preset is scaled to this machine by default; real weights keep the preset's shape.
  request.shape = ShapeFrom(
      values, "",
      request.weights.empty() ? executor::DefaultTargetShape() : executor::ShapeOverrides{});
  request.draft = values["draft"].as<std::string>();
  request.draft_weights = values["draft-weights"].as<std::string>();
  request.draft_shape = ShapeFrom(
      values, "draft-",
      request.draft_weights.empty() ? executor::DefaultDraftShape() : executor::ShapeOverrides{});
  request.workload = executor::WorkloadFromString(values["workload"].as<std::string>());
  request.batch = values["batch"].as<int64_t>();
  request.prompt_tokens = values["prompt"].as<int64_t>();
  request.output_tokens = values["tokens"].as<int64_t>();
  request.beam_width = values["beam"].as<int64_t>();
  request.gamma = values["gamma"].as<int64_t>();
  request.acceptance = executor::AcceptanceFromString(values["acceptance"].as<std::string>());
  request.alpha = base::ParseNumber(values["alpha"].as<std::string>(), "alpha");
  request.temperature = base::ParseNumber(values["temperature"].as<std::string>(), "temperature");
  request.routing = routing::ParseRoutingSpec(values["routing"].as<std::string>());
  request.seed = values["seed"].as<uint64_t>();
  request.threads = values["threads"].as<int>();
  request.trace_out = values["trace-out"].as<std::string>();
  base::RequireDistinctOutputs({{"--out", output.out}, {"--trace-out", request.trace_out}});
  if (!values["alpha"].defaulted() && request.acceptance != executor::Acceptance::kFixedAlpha) {
    throw base::Error("--alpha applies to --acceptance alpha only");
  }
  if (values.count("offload")) {
    executor::offload::OffloadOptions offload;
    offload.policy = values["offload"].as<std::string>();
    if (!values.count("expert-memory"))
      throw base::Error("--offload needs --expert-memory BYTES (the RAM expert cache)");
    offload.expert_memory_bytes = static_cast<int64_t>(
        base::ParseBytes(values["expert-memory"].as<std::string>(), "--expert-memory"));
    if (values.count("offload-dir")) offload.offload_dir = values["offload-dir"].as<std::string>();
    offload.reader_threads = values["offload-readers"].as<int>();
    for (const policies::PolicyOptionFlag& flag : policy_flags) {
      if (values.count(flag.name))
        offload.policy_options.*flag.member = values[flag.name].as<int64_t>();
    }
    if (values.count("offload-calibration")) {
      const executor::ExecutorConfig config = executor::ExecutorConfigFromSpec(
          model::PresetStore::Default().LoadModel(request.model), request.shape);
      sim::RoutingCalibration calibration = sim::CalibrateRouting(
          values["offload-calibration"].as<std::string>(), config.num_layers, config.num_experts,
          config.top_k, request.seed, sim::CalibrationOptions{});
      offload.popularity = std::move(calibration.popularity);
      offload.history = std::move(calibration.history);
    }
    request.offload = offload;
  } else {
    for (const char* flag : {"expert-memory", "offload-dir", "offload-calibration"}) {
      if (values.count(flag))
        throw base::Error(std::string("--") + flag + " applies with --offload POLICY only");
    }
    for (const policies::PolicyOptionFlag& flag : policy_flags) {
      if (values.count(flag.name))
        throw base::Error("--" + flag.name +
                          " is a policy option: it applies with --offload POLICY only");
    }
  }
  request.Validate();

  nlohmann::json report = executor::RunWorkload(request, model::PresetStore::Default());
  report["provenance"] = Provenance();
  if (output.format == Format::kTable) {
    std::cout << executor::RunReportText(report);
  } else {
    EmitJsonOrCsv(output, report);  // CSV: the report's summary (its scalars) as one row
  }
  return 0;
}

}  // namespace

void RegisterRunCommands(std::vector<Command>& commands) {
  commands.push_back({{"run"}, "run a workload on the reference CPU executor and measure it", Run});
}

}  // namespace moelab::cli
