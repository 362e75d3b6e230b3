// moelab sim serve: the serving simulator (sim/serving_simulator.h, plan/serve_sim.h).
#include <optional>
#include <string>

#include "base/atomic_file.h"
#include "base/error.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/policy_options.h"
#include "cli/serving_options.h"
#include "base/units.h"
#include "model/preset_store.h"
#include "plan/serve_sim.h"

namespace moelab::cli {

std::optional<Printed> SimServePrinted(const std::vector<std::string>& args) {
  plan::ServeSimRequest request;
  plan::ServeOffload offload;
  std::string trace_out, decisions_out;
  const std::string offload_help =
      "offload routed experts with this policy (" + policies::DefaultPolicyRegistry().NameList() +
      "): each replica runs the offload simulator on --hardware's memory tiers, link and storage "
      "(moelab serve --offload's counterpart)";
  po::options_description options("moelab sim serve");
  // clang-format off
  options.add_options()
      ("model", po::value<std::string>(&request.model), "MoE model preset or path (required)")
      ("hardware", po::value<std::string>(), "hardware preset or path: its roofline prices each iteration (or --profile)")
      ("replicas", Into(&request.options.replicas), "replicas, each with its own scheduler and KV budget")
      ("router", ParsedInto(&request.options.router, "round-robin", sim::ParseRouter), "round-robin | least-outstanding")
      ("kv-memory-fraction", NumberInto(&request.kv_memory_fraction, "kv-memory-fraction"), "share of device memory weights and KV may use when --kv-blocks is 0 (vLLM's gpu_memory_utilization)")
      ("iteration-overhead-s", NumberInto(&request.iteration_overhead_s, "iteration-overhead-s"), "seconds each iteration adds beyond its operators (scheduling, launches)")
      ("gamma", Into(&request.gamma), "speculative decoding: draft tokens each decode verifies (0: none)")
      ("alpha", NumberInto(&request.alpha, "alpha"), "with --gamma: each draft accepted by a seeded coin at this rate, [0, 1) (serve --alpha's draws)")
      ("acceptance-seed", Into(&request.acceptance_seed), "with --gamma: the coins' seed (serve's --seed)")
      ("trace-out", Into(&trace_out), "write a Perfetto timeline: iterations, queue and KV use per replica")
      ("decisions-out", Into(&decisions_out), "write the scheduler's decisions (moelab.serving_decisions/1; --replicas 1)")
      ("offload", Into(&offload.policy), offload_help.c_str())
      ("accelerator-memory", ParsedIntoOptional(&offload.accelerator_bytes, [](const std::string& text) { return base::ParseBytes(text, "--accelerator-memory"); }), "with --offload: the memory of --hardware's accelerator (its weights outside the routed experts, the KV budget, the expert cache), bytes or with a unit (24GB)")
      ("expert-memory", ParsedIntoOptional(&offload.expert_memory_bytes, [](const std::string& text) { return base::ParseBytes(text, "--expert-memory"); }), "with --offload, instead of --accelerator-memory: the expert cache and staging buffers alone, as moelab serve --expert-memory takes it");
  AddPolicyOptions(options, offload.policy_options);
  // clang-format on
  AddDraftModelOptions(options, &request.draft, "with --gamma: the draft model preset or path");
  AddLoadOptions(options, request.load, request.slo);
  AddSchedulerOptions(options, request.options.scheduler, SchedulerHost::kSimulator);
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  AddPredictionRoutingOptions(options, request.routing, request.routing_seed);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sim serve --model M --hardware H|--profile FIT.json "
                    "[--calibrate PROFILE.json] --arrivals poisson:R|gamma:R,CV|constant:R|trace:F "
                    "(--requests N | --duration S) --prompt-tokens DIST --output-tokens DIST "
                    "[--seed S] [--slo-ttft S] [--slo-tpot S] [scheduler options] [--replicas N "
                    "--router round-robin|least-outstanding] [--gamma G [--alpha A] "
                    "[--acceptance-seed S] [--draft D]] [--offload POLICY --hardware H "
                    "[--accelerator-memory BYTES | --expert-memory BYTES] [policy options]] "
                    "[--routing R] [--trace-out F] "
                    "[--decisions-out F] [--json|--csv]",
                    options, args, values)) {
    return std::nullopt;
  }
  if (!values.count("model")) throw base::Error("--model is required (see --help)");
  if (!values.count("hardware") && !values.count("profile")) {
    throw base::Error("--hardware H or --profile FIT.json is required (the cost source)");
  }
  CheckLoadOptions(values, request.load);
  // A trace's own length column is its requests' lengths: the option beside it would be ignored.
  auto given = [&](const char* name) { return values.count(name) && !values[name].defaulted(); };
  serving::CheckLengthSources(request.load, given("prompt-tokens"), given("output-tokens"),
                              "--prompt-tokens", "--output-tokens", true);
  for (const char* sd_only : {"alpha", "acceptance-seed", "draft", "draft-model"}) {
    if (values.count(sd_only) && !values[sd_only].defaulted() && request.gamma == 0)
      throw base::Error(std::string("--") + sd_only + " applies with --gamma G (G >= 1) only");
  }
  if (!decisions_out.empty() && request.options.replicas != 1) {
    throw base::Error("--decisions-out: needs --replicas 1 (a decision log is one scheduler's)");
  }
  const OutputRequest output = OutputRequestFrom(values);
  request.cost = CostSourceOptionsFrom(values);
  if (values.count("offload") && !values["offload"].defaulted()) {
    if (!values.count("hardware")) {
      throw base::Error(
          "--offload: needs --hardware H, the machine whose memory tiers, link and storage hold "
          "the experts (a CPU-only machine: moelab hw from-profile P.json --memory BYTES); "
          "--profile may still price the computation");
    }
    offload.hardware = values["hardware"].as<std::string>();
    // --hardware names the offload's tiers here: beside --profile it is not a second cost source.
    if (request.cost.fitted_profile) request.cost.hardware_given = false;
    request.offload = offload;
  } else {
    RefuseUnusedPolicyOptions(values, "it applies with --offload POLICY only");
    for (const char* memory : {"accelerator-memory", "expert-memory"}) {
      if (values.count(memory) && !values[memory].defaulted())
        throw base::Error(std::string("--") + memory + " applies with --offload POLICY only");
    }
  }
  request.options.keep_iterations = !trace_out.empty();
  request.options.keep_plans = !decisions_out.empty();
  base::RequireWritableDistinctOutputs(
      {{"--out", output.out}, {"--trace-out", trace_out}, {"--decisions-out", decisions_out}});
  const plan::ServeSimResult result = plan::RunServeSim(request, model::PresetStore::Default());
  Printed printed{plan::Render(result, output.format), output.out, {}};
  if (!trace_out.empty()) printed.files.emplace_back(trace_out, result.TraceJson());
  if (!decisions_out.empty())
    printed.files.emplace_back(decisions_out, result.DecisionsJson().dump(1) + "\n");
  return printed;
}

int SimServe(const std::vector<std::string>& args) { return EmitPrinted(SimServePrinted(args)); }

}  // namespace moelab::cli
