// moelab plan capacity: per hardware the fewest replicas and the settings meeting p99 TTFT and
// TPOT objectives at a rate (plan/capacity.h), by the serving simulator.
#include <algorithm>
#include <optional>
#include <string>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/number_lists.h"
#include "cli/command.h"
#include "cli/cost_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "model/preset_store.h"
#include "plan/capacity.h"

namespace moelab::cli {

std::optional<Printed> PlanCapacityPrinted(const std::vector<std::string>& args) {
  plan::CapacityRequest request;
  std::string plot_out;
  request.prompt_tokens = serving::ParseLengths("512", "--prompt-tokens");
  request.output_tokens = serving::ParseLengths("128", "--output-tokens");
  po::options_description options("moelab plan capacity");
  // clang-format off
  options.add_options()
      ("model", po::value<std::string>(&request.model), "MoE model preset or path (required)")
      ("hardware", po::value<std::string>(), "hardware presets to compare, comma-separated (required); one replica is one such preset")
      ("rate", NumberInto(&request.rate_per_s, "rate"), "Poisson arrival rate, requests per second (required)")
      ("slo-ttft-p99", NumberInto(&request.slo_ttft_p99_s, "slo-ttft-p99"), "p99 TTFT objective, seconds (required)")
      ("slo-tpot-p99", NumberInto(&request.slo_tpot_p99_s, "slo-tpot-p99"), "p99 TPOT objective, seconds (required)")
      ("max-batch", po::value<std::string>()->default_value("64"), "max running sequences to try, a list")
      ("chunk", po::value<std::string>()->default_value("0"), "prefill chunk tokens to try, a list (0: no cap)")
      ("gamma", po::value<std::string>()->default_value("0"), "speculative-decoding gammas to try, a list (0: no SD)")
      ("alpha", NumberInto(&request.alpha, "alpha"), "with --gamma: each draft accepted by a seeded coin at this rate, [0, 1)")
      ("policy", po::value<std::string>()->default_value("resident"), "expert placements to try, a list: resident (every expert in the accelerator's memory) and offload policies, each priced as sim serve --offload prices it on the hardware preset")
      ("plot-out", Into(&plot_out), "write a gnuplot script (data inline): throughput per replica vs p99 TTFT, per hardware")
      ("requests", Into(&request.requests), "requests simulated per candidate and replica count")
      ("seed", Into(&request.seed), "seed of the arrivals and lengths")
      ("prompt-tokens", ParsedInto(&request.prompt_tokens, "512", [](const std::string& text) { return serving::ParseLengths(text, "--prompt-tokens"); }), "prompt length: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("output-tokens", ParsedInto(&request.output_tokens, "128", [](const std::string& text) { return serving::ParseLengths(text, "--output-tokens"); }), "output length: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("max-batched-tokens", Into(&request.scheduler.max_batched_tokens), "tokens one iteration processes at most")
      ("kv-block-tokens", Into(&request.scheduler.kv_block_tokens), "tokens per KV block")
      ("kv-memory-fraction", NumberInto(&request.kv_memory_fraction, "kv-memory-fraction"), "share of device memory weights and KV may use")
      ("router", ParsedInto(&request.router, "round-robin", sim::ParseRouter), "round-robin | least-outstanding")
      ("max-replicas", Into(&request.max_replicas), "the most replicas searched per candidate")
      ("price", ParsedInto(&request.price_usd_per_hour, "", [](const std::string& text) { return text.empty() ? std::map<std::string, double>{} : plan::ParsePrices(text); }), "hourly price of one replica, HARDWARE=USD,... (overrides the presets' price_usd_per_hour)");
  // clang-format on
  AddDraftModelOptions(options, &request.draft, "with --gamma: the draft model preset or path");
  AddOutputOptions(options);
  AddCostSourceOptions(options, ProfileRole::kBesideHardware);
  po::variables_map values;
  if (!ParseOptions(
          "usage: moelab plan capacity --model M --hardware LIST --rate R "
          "--slo-ttft-p99 S --slo-tpot-p99 S [--max-batch LIST] [--chunk LIST] "
          "[--gamma LIST [--alpha A] [--draft D]] [--policy LIST] [--requests N] [--seed S] "
          "[--price H=USD_PER_H,...] [--plot-out F.gp] [--json|--csv]",
          options, args, values)) {
    return std::nullopt;
  }
  for (const char* required : {"model", "hardware", "rate", "slo-ttft-p99", "slo-tpot-p99"}) {
    if (!values.count(required) || values[required].defaulted())
      throw base::Error(std::string("--") + required + " is required (see --help)");
  }
  request.policies = SplitNameList(values["policy"].as<std::string>(), "policy");
  request.hardware = SplitNameList(values["hardware"].as<std::string>(), "hardware");
  request.max_batch = base::ParseIntList(values["max-batch"].as<std::string>(), "max-batch", 1);
  request.chunk = base::ParseIntList(values["chunk"].as<std::string>(), "chunk", 0);
  request.gamma = base::ParseIntList(values["gamma"].as<std::string>(), "gamma", 0);
  const bool speculative =
      std::any_of(request.gamma.begin(), request.gamma.end(), [](int64_t g) { return g > 0; });
  for (const char* sd_only : {"alpha", "draft", "draft-model"}) {
    if (values.count(sd_only) && !values[sd_only].defaulted() && !speculative)
      throw base::Error(std::string("--") + sd_only + " applies with --gamma G (G >= 1) only");
  }
  request.cost = CostSourceOptionsFrom(values);
  const OutputRequest output = OutputRequestFrom(values);
  base::RequireWritableDistinctOutputs({{"--out", output.out}, {"--plot-out", plot_out}});
  const plan::CapacityResult result = plan::PlanCapacity(request, model::PresetStore::Default());
  report::RowSet rows = result.Rows();
  Printed printed{PrintedResult(output, result.ToJson(), result.Text(), rows), output.out, {}};
  if (!plot_out.empty()) printed.files.emplace_back(plot_out, result.GnuplotScript());
  return printed;
}

int PlanCapacity(const std::vector<std::string>& args) {
  return EmitPrinted(PlanCapacityPrinted(args));
}

}  // namespace moelab::cli
