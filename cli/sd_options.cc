#include "cli/sd_options.h"

#include "cli/cost_options.h"
#include "cli/output.h"

namespace moelab::cli {

void AddSdSweepOptions(po::options_description& options, plan::SdSweepRequest& request) {
  request.model = "qwen2-57b-a14b";
  request.draft = "qwen2-0.5b";
  const auto int_list = [](const char* name) {
    return [name](const std::string& text) { return base::ParseIntList(text, name, 1); };
  };
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "target model preset or path")
      ("draft", Into(&request.draft), "draft model preset or path")
      ("hardware", po::value<std::string>()->default_value("2xa100-80gb-sxm"), "hardware preset or path (the analytic roofline cost source)")
      ("batch", ParsedInto(&request.plan.batches, "1-256:x2", int_list("batch")), "batch sizes: 1,2,4 or 1-8 or 1-256:x2")
      ("gamma", ParsedInto(&request.plan.gammas, "1-8", int_list("gamma")), "draft lengths")
      ("context", Into(&request.plan.context_length), "tokens already in each sequence's KV cache")
      ("verify", ParsedInto(&request.plan.verify, "gamma+1", model::VerifyPositionsFromString), "positions the target verifies per sequence: gamma+1 or gamma");
  // clang-format on
}

void AddSdSweepSources(po::options_description& options, plan::SdSweepRequest& request) {
  AddOutputOptions(options);
  AddCostSourceOptions(options);
  AddPredictionRoutingOptions(options, request.routing, request.routing_seed);
}

}  // namespace moelab::cli
