// moelab sim ep: a MoE step laid out EP x TP on a node, with and without EPS-MoE's expert pipeline
// (sim/ep_simulator.h, plan/ep_run.h).
#include <optional>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/message_text.h"
#include "base/number_lists.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/ep_run.h"

namespace moelab::cli {
namespace {

// --ep-chunks: a count >= 1, or auto (unset: the sweep's optimum).
std::optional<int64_t> ChunksFrom(const std::string& text) {
  if (text == "auto") return std::nullopt;
  return base::ParseWholeNumber(text, "ep-chunks", 1, 4096, "auto");  // as --max-chunks
}

}  // namespace

std::optional<Printed> SimEpPrinted(const std::vector<std::string>& args) {
  plan::EpRunRequest request;
  sim::EpConfig& config = request.config;
  std::string timeline;
  po::options_description options("moelab sim ep");
  // clang-format off
  options.add_options()
      ("model", po::value<std::string>(&request.model), "MoE model preset or path (required)")
      ("hardware", po::value<std::string>(&request.hardware), "node preset or path: its accelerators and links (required)")
      ("ep", Into(&config.ep), "expert-parallel ranks (a divisor of the routed experts)")
      ("tp", Into(&config.tp), "tensor-parallel devices per rank (attention heads and expert width)")
      ("attention", ParsedInto(&config.attention, "data-parallel", sim::EpAttentionFromString), "data-parallel (EPS-MoE's DP+EP) | tensor-parallel (TP+EP: attention over all ep x tp devices)")
      ("workload", ParsedInto(&config.workload, "prefill", sim::EpWorkloadFromString), "prefill | decode")
      ("batch", po::value<int64_t>()->notifier([&](int64_t batch) { request.batch = batch; }), "sequences per replica (default: --ep, one sequence per expert-parallel rank)")
      ("tokens", po::value<int64_t>()->notifier([&](int64_t tokens) { request.tokens = tokens; }), ("prefill: prompt tokens per sequence; decode: tokens already cached per sequence (default: " + std::to_string(plan::EpRunRequest::kDefaultTokens) + ", or the model's context if shorter)").c_str())
      ("ep-chunks", po::value<std::string>()->default_value("auto")->notifier([&](const std::string& text) { config.chunks = ChunksFrom(text); }), "EPS-MoE pipeline chunks N, or auto (the sweep's optimum)")
      ("max-chunks", Into(&config.max_chunks), "the largest N the sweep tries")
      ("comm-sms", Into(&config.comm_sms), "SMs kept for the all-to-alls while they overlap the GEMMs (EPS-MoE: 16 of 132)")
      ("comm-saturation-sms", Into(&config.comm_saturation_sms), "SMs from which an all-to-all runs at the link's speed (EPS-MoE Figure 7: 10-20)")
      ("comm-overlap", ParsedInto(&config.communication_overlaps_compute, "full", [](const std::string& text) { if (text != "full" && text != "none") throw base::Error("--comm-overlap '" + base::EscapeForMessage(text, 40) + "': expected full or none"); return text == "full"; }), "full: a chunk's exchanges run beside the GEMMs (GPUs: NCCL on its own SMs); none: between them, on the cores that compute (CPU ranks, every core a compute thread), so chunking hides nothing")
      ("comm-bits", NumberInto(&config.comm_bits, "comm-bits"), "bits per hidden value in the all-to-alls (8: FP8 communication)")
      ("copy-bandwidth", NumberInto(&config.copy_bytes_per_s, "copy-bandwidth"), "bytes/s of the MoE block's row copies (packing, gathering for the GEMMs, scattering, combining); default: the accelerator's memory bandwidth, unpriced with a --profile of another machine")
      ("device-limit", Into(&config.device_limit), "ranks a token may reach (DeepSeek-V2's device-limited routing: 3); 0: no limit")
      ("gemm", ParsedInto(&config.gemm, "auto", sim::GemmChoiceFromString), "expert GEMM kernel: auto (by load, EPS-MoE) | group | dense")
      ("gemm-crossover-tokens", ParsedIntoOptional(&config.gemm_crossover_tokens, [](const std::string& text) { return base::ParseWholeNumber(text, "gemm-crossover-tokens", 1, int64_t{1} << 40); }), "tokens per expert from which auto picks DenseGemm (default: the crossover the GEMM model finds)")
      ("group-gemm-efficiency", NumberInto(&config.group_efficiency, "group-gemm-efficiency"), "a compute-bound GroupGemm tile's rate relative to a DenseGemm's (EPS-MoE Table 5: 0.889)")
      ("timeline", Into(&timeline), "write a Chrome trace-event timeline (Perfetto) of one MoE layer here");
  // clang-format on
  AddOutputOptions(options);
  AddCostSourceOptions(options, ProfileRole::kBesideHardware);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sim ep --model M --hardware NODE --ep E [--tp T] [--attention "
                    "data-parallel|tensor-parallel] --workload prefill|decode --ep-chunks N|auto "
                    "[--batch B] [--tokens T] [--timeline FILE] [--json|--csv]",
                    options, args, values)) {
    return std::nullopt;
  }
  for (const char* required : {"model", "hardware"}) {
    if (!values.count(required))
      throw base::Error(std::string("--") + required + " is required (see --help)");
  }
  // Options of a kernel choice the run does not make were accepted and changed nothing, while the
  // report named them.
  auto given = [&](const char* name) { return values.count(name) && !values[name].defaulted(); };
  if (given("gemm-crossover-tokens") && config.gemm != sim::GemmChoice::kAuto)
    throw base::Error("--gemm-crossover-tokens applies with --gemm auto only (it picks by load)");
  if (given("group-gemm-efficiency") && config.gemm == sim::GemmChoice::kDense)
    throw base::Error(
        "--group-gemm-efficiency applies with --gemm auto or group (--gemm dense "
        "runs no GroupGemm)");
  const OutputRequest output = OutputRequestFrom(values);
  request.cost = CostSourceOptionsFrom(values);
  request.cost.hardware_given = false;  // the node's links are needed whatever prices compute
  base::RequireWritableDistinctOutputs({{"--out", output.out}, {"--timeline", timeline}});
  const sim::EpResult result = plan::RunEp(request, model::PresetStore::Default());
  Printed printed{plan::Render(result, output.format), output.out, {}};
  if (!timeline.empty()) printed.files.emplace_back(timeline, result.TimelineJson());
  return printed;
}

int SimEp(const std::vector<std::string>& args) { return EmitPrinted(SimEpPrinted(args)); }

}  // namespace moelab::cli
