// moelab sim offload: the discrete-event expert-offloading simulator (sim/README.md).

#include <optional>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/units.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/policy_options.h"
#include "model/preset_store.h"
#include "plan/offload_sweep.h"
#include "plan/reports.h"
#include "sim/offload_simulator.h"

namespace moelab::cli {
namespace {

// --expert-bits and --attention-bits: a model's bits per weight, (0, 32].
double BitsFrom(const std::string& text, const std::string& option) {
  const double bits = base::ParseNumber(text, option);
  if (!(bits > 0 && bits <= 32))
    throw base::Error("--" + option + " " + text + ": expected bits in (0, 32]");
  return bits;
}

}  // namespace

std::optional<Printed> SimOffloadPrinted(const std::vector<std::string>& args) {
  sim::SimConfig config;
  sim::Workload& workload = config.workload;
  std::string model, hardware, trace_out;
  std::optional<double> expert_bits, attention_bits;
  const std::string policy_help =
      "offload policy (required): " + policies::DefaultPolicyRegistry().NameList();
  po::options_description options("moelab sim offload");
  // clang-format off
  options.add_options()
      ("model", po::value<std::string>(&model), "model preset or path (required)")
      ("hardware", po::value<std::string>(&hardware), "accelerator preset or path, with its host and host link (required)")
      ("policy", po::value<std::string>(&config.policy), policy_help.c_str());
  AddPolicyOptions(options, config.policy_options);
  options.add_options()
      ("workload", ParsedInto(&workload.kind, "decode", sim::WorkloadKindFromString), "decode | prefill | beam | batch | verify")
      ("prompt", Into(&workload.prompt_tokens), "prompt tokens per request")
      ("tokens", Into(&workload.output_tokens), "output tokens per request")
      ("beam", Into(&workload.beam_width), "beam width for --workload beam")
      ("batch", Into(&workload.batch), "requests for --workload batch, prefill or verify")
      ("gamma", Into(&workload.gamma), "draft tokens per verify pass for --workload verify")
      ("alpha", NumberInto(&workload.alpha, "alpha"), "acceptance rate for --workload verify, [0, 1)")
      ("expert-bits", ParsedIntoOptional(&expert_bits, [](const std::string& text) { return BitsFrom(text, "expert-bits"); }), "bits per routed-expert weight (default: the model's; with --profile, the profiled format's)")
      ("attention-bits", ParsedIntoOptional(&attention_bits, [](const std::string& text) { return BitsFrom(text, "attention-bits"); }), "bits per attention weight (default: the model's; with --profile, the profiled format's)")
      ("routing", ParsedInto(&config.routing, "uniform", routing::ParseRoutingSpec), "uniform | popularity:FILE | correlated:locality=P,layer=P[,popularity=FILE] | trace:FILE")
      ("accelerator-memory", ParsedIntoOptional(&config.accelerator_bytes, [](const std::string& text) { return base::ParseBytes(text, "--accelerator-memory"); }), "accelerator memory for the run: bytes or with a unit (24GB, 16GiB)")
      ("cpu-threads", Into(&config.cpu_threads), "CPU threads for CPU-run experts (0: all the host's cores)")
      ("layer-overhead-s", NumberInto(&config.layer_overhead_s, "layer-overhead-s"), "seconds per transformer layer and pass the compute stream spends outside the priced kernels (an eager framework's dispatch; 0 for a compiled engine)")
      ("seed", Into(&config.seed), "seed for routing and calibration")
      ("speculative-recall", po::value<std::string>()->notifier([&](const std::string& recall) {
         config.speculative_recall = recall == "cooccurrence" ? std::nullopt : std::optional<double>(base::ParseNumber(recall, "speculative-recall")); }),
       "lru-prefetch's speculative gate: the recall R in [0, 1] with which each expert the next layer uses is predicted (default 0.8, Mixtral-offloading's Figure 2), or 'cooccurrence' for the calibration's co-occurrence stand-in alone; a replayed executor trace overrides both")
      ("trace-out", Into(&trace_out), "write a Chrome trace-event timeline (Perfetto) here");
  // clang-format on
  AddOutputOptions(options);
  AddCostSourceOptions(options, ProfileRole::kBesideHardware);
  po::variables_map values;
  if (!ParseOptions(
          "usage: moelab sim offload --model M --hardware H --policy NAME [" +
              PolicyOptionsUsage() +
              "] --workload decode|prefill|beam|batch|verify --prompt N --tokens M [--beam W "
              "--batch B --gamma G --alpha A] [--expert-bits X --attention-bits Y] [--routing "
              "uniform|popularity:FILE|correlated:...|trace:FILE] [--accelerator-memory BYTES|GB] "
              "--seed S [--trace-out TIMELINE.json] [--json|--csv]\n\npolicies:\n" +
              policies::DefaultPolicyRegistry().HelpList(),
          options, args, values))
    return std::nullopt;

  for (const char* required : {"model", "hardware", "policy"}) {
    if (!values.count(required)) {
      std::string message = std::string("--") + required + " is required";
      if (std::string(required) == "policy")
        message += "; valid policies: " + policies::DefaultPolicyRegistry().NameList();
      throw base::Error(message + " (see --help)");
    }
  }
  const OutputRequest output = OutputRequestFrom(values);
  // Validate the policy name before loading anything, so a typo is the first thing reported.
  policies::DefaultPolicyRegistry().Find(config.policy);
  // The speculative gate is lru-prefetch's (with --prefetch 0 it is simply unused, so a grid over
  // --prefetch keeps one --speculative-recall); any other policy would ignore it without a word.
  if (values.count("speculative-recall") && config.policy != "lru-prefetch") {
    throw base::Error("--speculative-recall sets lru-prefetch's speculative gate; policy '" +
                      config.policy + "' has none");
  }
  if (!values["beam"].defaulted() && workload.kind != sim::WorkloadKind::kBeam)
    throw base::Error("--beam applies to --workload beam only");
  if ((!values["gamma"].defaulted() || !values["alpha"].defaulted()) &&
      workload.kind != sim::WorkloadKind::kVerify)
    throw base::Error("--gamma and --alpha apply to --workload verify only");
  workload.Validate();

  fit::CostSourceOptions cost_options = CostSourceOptionsFrom(values);
  cost_options.hardware_given = false;  // the simulator needs --hardware whatever prices it
  cost_options.expert_bits = expert_bits;
  cost_options.attention_bits = attention_bits;
  cost_options.Validate();
  config.record_timeline = !trace_out.empty();
  base::RequireWritableDistinctOutputs({{"--out", output.out}, {"--trace-out", trace_out}});

  const model::PresetStore store = model::PresetStore::Default();
  config.model = store.LoadModel(model);
  config.hardware = store.LoadHardware(hardware);
  if (expert_bits) config.model.bits.experts = *expert_bits;
  if (attention_bits) config.model.bits.attention = *attention_bits;
  const plan::OffloadRunResult run = plan::RunOffload(config, cost_options, store);
  Printed printed{plan::Render(run, output.format), output.out, {}};
  if (!trace_out.empty()) printed.files.emplace_back(trace_out, run.result.TimelineJson());
  return printed;
}

int SimOffload(const std::vector<std::string>& args) {
  return EmitPrinted(SimOffloadPrinted(args));
}

}  // namespace moelab::cli
