#include "base/atomic_file.h"
#include "base/error.h"
#include "base/units.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/policy_options.h"
#include "cli/shape_options.h"
#include "executor/offload/expert_reader.h"
#include "executor/run_report.h"
#include "executor/run_workload.h"

namespace moelab::cli {

int Run(const std::vector<std::string>& args) {
  executor::RunRequest request;
  executor::offload::OffloadOptions offload;
  std::string offload_calibration;
  po::options_description options("moelab run");
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "target model preset or path (shape overrides below apply)")
      ("weights", Into(&request.weights), "Hugging Face safetensors file or folder for the target (default: seeded synthetic weights)")
      ("expert-bits", Into(&request.expert_bits), "routed expert weights: 16 (bf16), 8 (q8_0) or 4 (q4_0); bf16 inputs are quantized at load")
      ("attention-bits", Into(&request.attention_bits), "attention q|k|v and o weights: 16, 8 or 4 bits, as --expert-bits")
      ("draft", Into(&request.draft), "draft model for --workload sd")
      ("draft-weights", Into(&request.draft_weights), "safetensors for the draft (default: synthetic)")
      ("workload", ParsedInto(&request.workload, "decode", executor::WorkloadFromString), "prefill | decode | beam | sd")
      ("batch", Into(&request.batch), "sequences decoded together")
      ("prompt", Into(&request.prompt_tokens), "prompt tokens per sequence (seeded synthetic prompts)")
      ("tokens", Into(&request.output_tokens), "output tokens per sequence")
      ("beam", Into(&request.beam_width), "beam width for --workload beam")
      ("gamma", Into(&request.gamma), "draft tokens per SD round")
      ("acceptance", ParsedInto(&request.acceptance, "alpha", executor::AcceptanceFromString), "SD acceptance: alpha (the draft proposes the target's own next token at rate alpha, for synthetic weights) | alpha-coin (any proposal accepted at rate alpha: routes unlike a real model) | greedy | sampling")
      ("alpha", NumberInto(&request.alpha, "alpha"), "acceptance rate for --acceptance alpha or alpha-coin, [0, 1)")
      ("temperature", NumberInto(&request.temperature, "temperature"), "sampling temperature (0: greedy decode; rejection sampling uses 1 when 0)")
      ("routing", ParsedInto(&request.routing, "gate", routing::ParseRoutingSpec), "gate | uniform | popularity:FILE | trace:FILE")
      ("seed", Into(&request.seed), "seed for weights, prompts, sampling and routing")
      ("threads", Into(&request.threads), "threads (default: MOELAB_THREADS or all cores)")
      ("device", Into(&request.device), "where the forward passes run: cpu (default) or gpu (the CUDA backend: bf16 weights on the device, cuBLAS GEMMs; moelab devices lists the GPUs)")
      ("gpu", Into(&request.gpu_index), "which GPU with --device gpu (index as moelab devices prints it)")
      ("trace-out", Into(&request.trace_out), "write the routing trace (moelab.routing_trace/1) here")
      ("timeline-out", Into(&request.timeline_out), "write the execution timeline here: the compute thread's operators and waits for expert reads, each reader's reads, as Chrome trace-event JSON with sim offload --trace-out's op names (Perfetto); --device cpu")
      ("offload", po::value<std::string>(&offload.policy), "offload routed experts with this policy: to storage on --device cpu (on-demand, lru-prefetch, static-split, fmoe, stream-all), to pinned host memory behind a device cache on --device gpu (those and fiddler); needs --expert-memory")
      ("expert-memory", po::value<std::string>()->notifier([&](const std::string& text) { offload.expert_memory_bytes = static_cast<int64_t>(base::ParseBytes(text, "--expert-memory")); }), "memory for the expert cache and staging buffers with --offload: RAM on --device cpu, GPU memory on --device gpu (bytes, or with a unit: 512MB, 2GiB)")
      ("offload-dir", po::value<std::string>()->notifier([&](const std::string& dir) { offload.offload_dir = dir; }), "folder of the expert store with --offload (default $MOELAB_OFFLOAD_DIR, else $XDG_CACHE_HOME/moelab/experts, else ~/.cache/moelab/experts)")
      ("offload-readers", Into(&offload.reader_threads), "asynchronous expert reads in flight with --offload")
      ("offload-reader", po::value<std::string>()->notifier([&](const std::string& kind) { offload.reader = executor::offload::ParseReaderKind(kind); }), "how --offload issues its expert reads: threads (default; a blocking pread per reader thread) or io_uring (one ring of --offload-readers reads; needs liburing and a kernel that allows io_uring)")
      ("offload-calibration", po::value<std::string>(&offload_calibration), "routing the policy calibrates on before the first token with --offload (popularity, fMoE's expert maps), as sim offload calibrates on its --routing (e.g. trace:FILE; default none: flat popularity, no history)");
  // clang-format on
  AddPolicyOptions(options, offload.policy_options);
  AddOutputOptions(options);
  po::options_description shape(
      "target shape (defaults: Mixtral-8x7B scaled to 1.6 GB, docs/executor.md)");
  AddShapeOptions(shape, "", executor::DefaultTargetShape());
  po::options_description draft_shape("draft shape");
  AddShapeOptions(draft_shape, "draft-", executor::DefaultDraftShape());
  options.add(shape).add(draft_shape);
  po::variables_map values;
  if (!ParseOptions("usage: moelab run --model M [shape overrides] --workload "
                    "prefill|decode|beam|sd --batch B --prompt N --tokens M [--beam W] [--draft D "
                    "--gamma G --alpha A] [--routing R] --seed S [--json|--csv]",
                    options, args, values)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  // A preset is scaled to this machine by default; real weights keep the preset's shape.
  request.shape = ShapeFrom(
      values, "",
      request.weights.empty() ? executor::DefaultTargetShape() : executor::ShapeOverrides{});
  request.draft_shape = ShapeFrom(
      values, "draft-",
      request.draft_weights.empty() ? executor::DefaultDraftShape() : executor::ShapeOverrides{});
  base::RequireDistinctOutputs({{"--out", output.out},
                                {"--trace-out", request.trace_out},
                                {"--timeline-out", request.timeline_out}});
  if (!values["alpha"].defaulted() && !executor::IsFixedRate(request.acceptance)) {
    throw base::Error("--alpha applies to --acceptance alpha or alpha-coin only");
  }
  if (values.count("offload")) {
    if (!values.count("expert-memory"))
      throw base::Error("--offload needs --expert-memory BYTES (the RAM expert cache)");
    if (values.count("offload-calibration")) {
      const executor::ExecutorConfig config = executor::ExecutorConfigFromSpec(
          model::PresetStore::Default().LoadModel(request.model), request.shape);
      offload.CalibrateOn(offload_calibration, config.num_layers, config.num_experts, config.top_k,
                          request.seed);
    }
    if (request.device == "gpu") {
      for (const char* flag : {"offload-dir", "offload-readers", "offload-reader"}) {
        // Given on the command line, not its default (--offload-readers has one).
        if (values.count(flag) && !values[flag].defaulted()) {
          throw base::Error(std::string("--") + flag +
                            " applies to --device cpu (storage -> RAM); on --device gpu the "
                            "experts' slow tier is pinned host memory");
        }
      }
    }
    request.offload = offload;
  } else {
    for (const char* flag :
         {"expert-memory", "offload-dir", "offload-calibration", "offload-reader"}) {
      if (values.count(flag))
        throw base::Error(std::string("--") + flag + " applies with --offload POLICY only");
    }
    RefuseUnusedPolicyOptions(values, "it applies with --offload POLICY only");
  }
  request.Validate();

  nlohmann::json report = executor::RunWorkload(request, model::PresetStore::Default());
  report["provenance"] = Provenance();
  EmitResult(output, report, executor::RunReportText(report));  // CSV: the report's scalars
  return 0;
}

}  // namespace moelab::cli
