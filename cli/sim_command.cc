// moelab sim offload: the discrete-event expert-offloading simulator (sim/README.md).
#include <cctype>
#include <cmath>
#include <iostream>

#include "cli/cost_options.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "base/atomic_file.h"
#include "base/error.h"
#include "base/units.h"
#include "model/preset_store.h"
#include "policies/registry.h"
#include "plan/offload_sweep.h"
#include "plan/reports.h"
#include "sim/offload_simulator.h"

namespace moelab::cli {
namespace {

// The usage line, with the policy options the registry declares.
std::string Usage(const std::vector<policies::PolicyOptionFlag>& policy_flags) {
  std::string flags;
  for (const policies::PolicyOptionFlag& flag : policy_flags)
    flags += (flags.empty() ? "--" : " --") + flag.name + " N";
  return "usage: moelab sim offload --model M --hardware H --policy NAME [" + flags +
         "] --workload decode|prefill|beam|batch|verify --prompt N --tokens M [--beam W --batch B "
         "--gamma G --alpha A] [--expert-bits X --attention-bits Y] [--routing "
         "uniform|popularity:FILE|correlated:...|trace:FILE] [--accelerator-memory BYTES|GB] "
         "--seed S [--trace-out TIMELINE.json] [--json|--csv]";
}

int SimOffload(const std::vector<std::string>& args) {
  po::options_description options("moelab sim offload");
  const sim::Workload workload_defaults;
  const std::string policy_help =
      "offload policy (required): " + policies::DefaultPolicyRegistry().NameList();
  options.add_options()("model", po::value<std::string>(), "model preset or path (required)")(
      "hardware", po::value<std::string>(),
      "accelerator preset or path, with its host and host link (required)")(
      "policy", po::value<std::string>(), policy_help.c_str());
  // Each policy declares its options (policies/registry.h): one flag per option.
  const std::vector<policies::PolicyOptionFlag> policy_flags =
      policies::PolicyOptionFlags(policies::DefaultPolicyRegistry());
  for (const policies::PolicyOptionFlag& flag : policy_flags)
    options.add_options()(flag.name.c_str(), po::value<int64_t>(), flag.help.c_str());
  options.add_options()("workload", po::value<std::string>()->default_value("decode"),
                        "decode | prefill | beam | batch | verify")(
      "prompt", po::value<int64_t>()->default_value(workload_defaults.prompt_tokens),
      "prompt tokens per request")(
      "tokens", po::value<int64_t>()->default_value(workload_defaults.output_tokens),
      "output tokens per request")("beam", po::value<int64_t>(),
                                   "beam width for --workload beam (default 4)")(
      "batch", po::value<int64_t>()->default_value(1),
      "requests for --workload batch, prefill or verify")(
      "gamma", po::value<int64_t>(),
      "draft tokens per verify pass for --workload verify (default 4)")(
      "alpha", po::value<std::string>(),
      "acceptance rate for --workload verify, [0, 1) (default 0.8)")(
      "expert-bits", po::value<std::string>(),
      "bits per routed-expert weight (default: the model's)")(
      "attention-bits", po::value<std::string>(),
      "bits per attention weight (default: the model's)")(
      "routing", po::value<std::string>()->default_value("uniform"),
      "uniform | popularity:FILE | correlated:locality=P,layer=P[,popularity=FILE] | trace:FILE")(
      "accelerator-memory", po::value<std::string>(),
      "accelerator memory for the run: bytes or with a unit (24GB, 16GiB)")(
      "cpu-threads", po::value<int64_t>()->default_value(0),
      "CPU threads for CPU-run experts (0: all the host's cores)")(
      "seed", po::value<uint64_t>()->default_value(0), "seed for routing and calibration")(
      "speculative-recall", po::value<std::string>(),
      "lru-prefetch's speculative gate: the recall R in [0, 1] with which each expert the next "
      "layer uses is "
      "predicted (default 0.8, Mixtral-offloading's Figure 2), or 'cooccurrence' for the "
      "calibration's "
      "co-occurrence stand-in alone; a replayed executor trace overrides both")(
      "trace-out", po::value<std::string>()->default_value(""),
      "write a Chrome trace-event timeline (Perfetto) here");
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  po::variables_map values;
  if (!ParseOptions(
          Usage(policy_flags) + "\n\npolicies:\n" + policies::DefaultPolicyRegistry().HelpList(),
          options, args, values))
    return 0;

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
  policies::DefaultPolicyRegistry().Find(values["policy"].as<std::string>());

  sim::SimConfig config;
  config.policy = values["policy"].as<std::string>();
  for (const policies::PolicyOptionFlag& flag : policy_flags) {
    if (values.count(flag.name))
      config.policy_options.*flag.member = values[flag.name].as<int64_t>();
  }

  sim::Workload& workload = config.workload;
  workload.kind = sim::WorkloadKindFromString(values["workload"].as<std::string>());
  workload.prompt_tokens = values["prompt"].as<int64_t>();
  workload.output_tokens = values["tokens"].as<int64_t>();
  workload.batch = values["batch"].as<int64_t>();
  if (values.count("beam")) {
    if (workload.kind != sim::WorkloadKind::kBeam)
      throw base::Error("--beam applies to --workload beam only");
    workload.beam_width = values["beam"].as<int64_t>();
  }
  if (values.count("gamma") || values.count("alpha")) {
    if (workload.kind != sim::WorkloadKind::kVerify)
      throw base::Error("--gamma and --alpha apply to --workload verify only");
    if (values.count("gamma")) workload.gamma = values["gamma"].as<int64_t>();
    if (values.count("alpha"))
      workload.alpha = base::ParseNumber(values["alpha"].as<std::string>(), "alpha");
  }
  workload.Validate();

  plan::CostSourceOptions cost_options = CostSourceOptionsFrom(values);
  cost_options.hardware_given = false;  // the simulator needs --hardware whatever prices it
  cost_options.Validate();
  config.routing = routing::ParseRoutingSpec(values["routing"].as<std::string>());
  config.seed = values["seed"].as<uint64_t>();
  if (values.count("speculative-recall")) {
    const std::string recall = values["speculative-recall"].as<std::string>();
    config.speculative_recall =
        recall == "cooccurrence"
            ? std::nullopt
            : std::optional<double>(base::ParseNumber(recall, "speculative-recall"));
  }
  config.cpu_threads = values["cpu-threads"].as<int64_t>();
  if (config.cpu_threads < 0) throw base::Error("--cpu-threads must be >= 0 (0: all cores)");
  if (values.count("accelerator-memory")) {
    config.accelerator_bytes =
        base::ParseBytes(values["accelerator-memory"].as<std::string>(), "--accelerator-memory");
  }
  const std::string trace_out = values["trace-out"].as<std::string>();
  config.record_timeline = !trace_out.empty();
  base::RequireDistinctOutputs({{"--out", output.out}, {"--trace-out", trace_out}});

  const model::PresetStore store = model::PresetStore::Default();
  config.model = store.LoadModel(values["model"].as<std::string>());
  config.hardware = store.LoadHardware(values["hardware"].as<std::string>());
  auto bits = [&](const char* option, double& field) {
    if (!values.count(option)) return;
    const double value = base::ParseNumber(values[option].as<std::string>(), option);
    if (!(value > 0 && value <= 32)) {
      throw base::Error(std::string("--") + option + " " + values[option].as<std::string>() +
                        ": expected bits in (0, 32]");
    }
    field = value;
  };
  bits("expert-bits", config.model.bits.experts);
  bits("attention-bits", config.model.bits.attention);
  const plan::OffloadRunResult run = plan::RunOffload(config, cost_options, store);
  if (!trace_out.empty()) base::WriteFileAtomically(trace_out, run.result.TimelineJson());
  report::Emit(plan::Render(run, output.format), output.out);
  return 0;
}

}  // namespace

void RegisterSimOffloadCommands(std::vector<Command>& commands) {
  commands.push_back(
      {{"sim", "offload"},
       "discrete-event simulation of expert offloading policies (TTFT, TPOT, hit rate, timeline)",
       SimOffload});
}

}  // namespace moelab::cli
