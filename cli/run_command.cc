#include <filesystem>
#include <iostream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/message_text.h"
#include "base/units.h"
#include "cli/command.h"
#include "cli/expert_parallel_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/offload_options.h"
#include "cli/shape_options.h"
#include "executor/offload/expert_reader.h"
#include "executor/run_report.h"
#include "executor/run_workload.h"
#include "routing/routing_trace.h"

namespace moelab::cli {

namespace {

constexpr const char* kUsage =
    "usage: moelab run --model M [shape overrides] --workload prefill|decode|beam|sd --batch B "
    "--prompt N --tokens M [--beam W] [--draft D --gamma G --alpha A] [--routing R] [--offload "
    "POLICY --expert-memory BYTES [--offload-dir DIR] [--offload-readers N] [--offload-reader "
    "threads|io_uring] [--offload-calibration R]] [--device cpu|gpu [--gpu N]] --seed S "
    "[--trace-out TRACE.json] [--timeline-out TIMELINE.json] [--json|--csv] [--out FILE]\n"
    "       mpirun -n R moelab run --expert-parallel R [--attention data-parallel|tensor-parallel] "
    "[--placement FILE] [--ep-chunks N|auto] ...\n\n"
    "Runs a workload on the executor, on the CPU (--device cpu, the default) or a CUDA GPU "
    "(--device gpu), and measures it: TTFT, TPOT, tokens/s, time per operator, routing, SD "
    "statistics, and with --offload the expert cache's hits, reads and stalls.";

// What `moelab run` parses: the request, the offload flags it turns into the request's
// OffloadOptions, and the files it writes.
struct RunFlags {
  executor::RunRequest request;
  OffloadFlags offload;
  std::string trace_out;
  std::string timeline_out;
  ExpertParallelFlags expert_parallel;
};

void AddRunOptions(po::options_description& options, RunFlags& flags) {
  // clang-format off
  options.add_options()
      ("model", Into(&flags.request.model), "target model preset or path (shape overrides below apply)")
      ("weights", Into(&flags.request.weights), "Hugging Face safetensors file or folder for the target (default: seeded synthetic weights)")
      ("expert-bits", Into(&flags.request.expert_bits), "routed expert weights: 16 (bf16), 8 (q8_0) or 4 (q4_0); bf16 inputs are quantized at load")
      ("attention-bits", Into(&flags.request.attention_bits), "attention q|k|v and o weights: 16, 8 or 4 bits, as --expert-bits")
      ("draft", Into(&flags.request.draft), "draft model for --workload sd")
      ("draft-weights", Into(&flags.request.draft_weights), "safetensors for the draft (default: synthetic)")
      ("workload", ParsedInto(&flags.request.workload, "decode", executor::WorkloadFromString), "prefill | decode | beam | sd")
      ("batch", Into(&flags.request.batch), "sequences decoded together (with --expert-parallel R and data-parallel attention, default R: one per rank)")
      ("prompt", Into(&flags.request.prompt_tokens), "prompt tokens per sequence (seeded synthetic prompts)")
      ("tokens", Into(&flags.request.output_tokens), "output tokens per sequence")
      ("beam", Into(&flags.request.beam_width), "beam width for --workload beam")
      ("gamma", Into(&flags.request.gamma), "draft tokens per SD round")
      ("acceptance", ParsedInto(&flags.request.acceptance, "alpha", executor::AcceptanceFromString), "SD acceptance: alpha (the draft proposes the target's own next token at rate alpha, for synthetic weights) | alpha-coin (any proposal accepted at rate alpha: routes unlike a real model) | greedy | sampling")
      ("alpha", NumberInto(&flags.request.alpha, "alpha"), "acceptance rate for --acceptance alpha or alpha-coin, [0, 1)")
      ("temperature", NumberInto(&flags.request.temperature, "temperature"), "sampling temperature (0: greedy decode; rejection sampling uses 1 when 0)")
      ("routing", ParsedInto(&flags.request.routing, "gate", routing::ParseRoutingSpec), "gate | uniform | popularity:FILE | trace:FILE")
      ("seed", Into(&flags.request.seed), "seed for weights, prompts, sampling and routing")
      ("threads", Into(&flags.request.threads), "threads (default: MOELAB_THREADS or all cores)")
      ("device", Into(&flags.request.device), "where the forward passes run: cpu (default) or gpu (the CUDA backend: bf16 weights on the device, routed experts also at --expert-bits 8 or 4, cuBLAS GEMMs; moelab devices lists the GPUs)")
      ("gpu", Into(&flags.request.gpu_index), "which GPU with --device gpu (index as moelab devices prints it)")
      ("trace-out", Into(&flags.trace_out), "write the routing trace (moelab.routing_trace/1) here")
      ("timeline-out", Into(&flags.timeline_out), "write the execution timeline here: the compute thread's operators and waits for expert reads, each reader's reads, as Chrome trace-event JSON with sim offload --trace-out's op names (Perfetto); --device cpu");
  // clang-format on
  AddOffloadOptions(options, flags.offload);
  AddExpertParallelOptions(options, flags.expert_parallel);
  AddOutputOptions(options);
  po::options_description shape(
      "target shape (defaults: Mixtral-8x7B scaled to 1.6 GB, docs/executor.md)");
  AddShapeOptions(shape, "", model::DefaultTargetShape());
  po::options_description draft_shape("draft shape");
  AddShapeOptions(draft_shape, "draft-", model::DefaultDraftShape());
  options.add(shape).add(draft_shape);
}

// The files the run asked for besides --out: the routing trace and the execution timeline.
void AddRunFiles(const executor::RunResult& result, const RunFlags& flags, Printed& printed) {
  if (!flags.trace_out.empty() && result.trace)
    printed.files.emplace_back(flags.trace_out, routing::RoutingTraceToText(*result.trace));
  if (!flags.timeline_out.empty())
    printed.files.emplace_back(flags.timeline_out, result.timeline_json);
}

// Options of a workload or device the run does not use were accepted and changed nothing (run
// --gamma 3 decoded without a draft; --gpu 3 ran on the CPU). The draft's shape options stay
// accepted: one shape string (target and draft) serves every workload of a harness.
void RefuseOptionsOfOtherWorkloads(const po::variables_map& values,
                                   const executor::RunRequest& request) {
  auto given = [&](const std::string& name) {
    return values.count(name) && !values[name].defaulted();
  };
  if (request.workload != executor::Workload::kSpeculative) {
    for (const char* sd_only : {"draft", "draft-weights", "gamma", "acceptance", "alpha"}) {
      if (given(sd_only))
        throw base::Error(std::string("--") + sd_only + " applies with --workload sd only");
    }
  }
  if (request.workload != executor::Workload::kBeam && given("beam"))
    throw base::Error("--beam applies with --workload beam only");
  if (request.device != "gpu" && given("gpu"))
    throw base::Error("--gpu applies with --device gpu only");
}

}  // namespace

int Run(const std::vector<std::string>& args) {
  RunFlags flags;
  executor::RunRequest& request = flags.request;
  po::options_description options("moelab run");
  AddRunOptions(options, flags);
  po::variables_map values;
  if (!ParseOptions(kUsage, options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  // A preset is scaled to this machine by default; real weights keep the preset's shape.
  request.shape = ShapeFrom(
      values, "", request.weights.empty() ? model::DefaultTargetShape() : model::ShapeOverrides{});
  request.draft_shape = ShapeFrom(
      values, "draft-",
      request.draft_weights.empty() ? model::DefaultDraftShape() : model::ShapeOverrides{});
  base::RequireWritableDistinctOutputs({{"--out", output.out},
                                        {"--trace-out", flags.trace_out},
                                        {"--timeline-out", flags.timeline_out}});
  if (!values["alpha"].defaulted() && !executor::IsFixedRate(request.acceptance)) {
    throw base::Error("--alpha applies to --acceptance alpha or alpha-coin only");
  }
  RefuseOptionsOfOtherWorkloads(values, request);
  ApplyOffloadFlags(values, flags.offload, flags.request);
  if (request.weights.empty() && std::filesystem::is_regular_file(request.model)) {
    // A model file ran at the executor's scaled default shape without a word: say so once, after
    // the file is known to load (a refusal stays one line).
    model::PresetStore::Default().LoadModel(request.model);
    std::cerr << "moelab: note: --model " << base::EscapeForMessage(request.model)
              << " runs at the executor's scaled default shape (docs/executor.md), not the "
                 "file's own; give --weights, or shape options (--layers, --hidden, ...)\n";
  }
  request.trace_requested = !flags.trace_out.empty();
  request.record_timeline = !flags.timeline_out.empty();
  const bool expert_parallel = ExpertParallelRequested(values);
  if (expert_parallel) DefaultBatchForExpertParallel(values, flags.expert_parallel, request);
  request.Validate();
  if (expert_parallel) return RunAcrossRanks(request, flags.expert_parallel, output);

  const executor::RunResult result = executor::RunWorkload(request, model::PresetStore::Default());
  nlohmann::json report = executor::RunResultToJson(result);
  report["provenance"] = Provenance();
  const report::RowSet rows =  // CSV: the report's scalars
      output.format == Format::kCsv ? report::JsonRow(report) : report::RowSet({});
  Printed printed{
      PrintedResult(output, report, executor::RunReportText(result), rows), output.out, {}};
  AddRunFiles(result, flags, printed);
  return EmitPrinted(printed);
}

}  // namespace moelab::cli
