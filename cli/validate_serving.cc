// moelab validate --cases serving: sim serve with the fitted profile against serve + loadgen.
#include "cli/validate_serving.h"

#include <filesystem>
#include <iostream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/message_text.h"
#include "cli/output.h"
#include "cli/serving_options.h"

namespace moelab::cli {

namespace {
const char* const kServingOnly[] = {
    "requests",        "prompt-tokens",       "output-tokens",      "kv-blocks",
    "kv-block-tokens", "max-running",         "max-batched-tokens", "prefill-chunk",
    "max-waiting",     "max-sequence-tokens", "overhead-batch",     "overhead-output-tokens",
    "overhead-pairs",  "queue-order",         "preemption",         "host-kv-blocks"};
}  // namespace

void AddValidateServingOptions(po::options_description& options,
                               validate::ServingValidationRequest& serving) {
  serving.scheduler.kv_blocks = 1024;  // moelab serve's default
  po::options_description group("--cases serving (the scheduler's options as moelab serve's)");
  // clang-format off
  group.add_options()
      ("requests", Into(&serving.requests), "requests per run (default: what the predicted saturation serves in 16 s, 4 s with --quick, at least 16)")
      ("prompt-tokens", ParsedInto(&serving.prompt_tokens, "uniform:16,96", [](const std::string& text) { return serving::ParseLengths(text, "--prompt-tokens"); }), "prompt length: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("output-tokens", ParsedInto(&serving.output_tokens, "uniform:8,48", [](const std::string& text) { return serving::ParseLengths(text, "--output-tokens"); }), "output length, as --prompt-tokens")
      ("overhead-batch", Into(&serving.overhead_batch), "the serving-overhead comparison's batch: requests of 8 prompt tokens sent together (default 8)")
      ("overhead-output-tokens", Into(&serving.overhead_output_tokens), "its output tokens per request (default 128): long enough that every request decodes together for a while")
      ("overhead-pairs", Into(&serving.overhead_pairs), "server/run pairs per round (default 3), the order alternating pair by pair; the ratio is the median over all pairs");
  // clang-format on
  AddSchedulerOptions(group, serving.scheduler, SchedulerHost::kEngine);
  options.add(group);
}

void RefuseServingOptionsElsewhere(const po::variables_map& values) {
  for (const char* name : kServingOnly) {
    if (values.count(name) && !values[name].defaulted())
      throw base::Error(std::string("--") + name + ": only with --cases serving");
  }
}

int ValidateServing(const validate::ValidationRequest& request, const po::variables_map& values,
                    validate::ServingValidationRequest& serving, const std::string& out,
                    bool quiet) {
  if (values.count("requests") && !values["requests"].defaulted() && serving.requests < 1) {
    throw base::Error("--requests " + std::to_string(serving.requests) +
                      ": at least 1 (leave it out for the saturation's 16 s)");
  }
  if (request.device != "cpu")
    throw base::Error("--device " + request.device + ": --cases serving runs on the CPU only");
  for (const char* name : {"draft", "reused-profile", "alpha", "timelines"}) {
    if (values.count(name) && !values[name].defaulted())
      throw base::Error(std::string("--") + name + ": not used by --cases serving");
  }
  serving.model = request.model;
  serving.shape = request.shape;
  serving.expert_bits = request.expert_bits;
  serving.attention_bits = request.attention_bits;
  serving.quick = request.quick;
  if (values.count("repeat") && !values["repeat"].defaulted()) serving.repeat = request.repeat;
  serving.profile = request.profile;
  serving.seed = request.seed;
  serving.threads = request.threads;
  serving.cache_bytes = request.cache_bytes;
  serving.profile_rounds = request.profile_rounds;
  if (!quiet) serving.progress = &std::cerr;
  serving.Validate();
  std::error_code error;
  if (!out.empty() && std::filesystem::exists(out, error) &&
      (!std::filesystem::is_directory(out, error) || !std::filesystem::is_empty(out, error))) {
    throw base::Error("--out " + base::EscapeForMessage(out) +
                      ": name a new or empty folder (validate --cases serving writes "
                      "validation-serving.json, profile.json, fit.json, report.md and "
                      "served-iterations.csv there)");
  }
  const validate::ServingValidationResult result =
      validate::RunServingValidation(serving, model::PresetStore::Default());
  nlohmann::json json = validate::ServingValidationToJson(result);
  json["provenance"] = Provenance();
  if (!out.empty()) {
    const std::filesystem::path folder(out);
    std::filesystem::create_directories(folder);
    base::WriteFileAtomically(folder / "validation-serving.json", json.dump(2) + "\n");
    base::WriteFileAtomically(folder / "profile.json", result.profile.dump(2) + "\n");
    base::WriteFileAtomically(folder / "fit.json", result.fit.dump(2) + "\n");
    base::WriteFileAtomically(folder / "report.md", validate::ServingValidationMarkdown(result));
    base::WriteFileAtomically(folder / "served-iterations.csv",
                              validate::ServedIterationsCsv(result));
  }
  if (values["json"].as<bool>()) {
    std::cout << json.dump(2) << "\n";
  } else {
    std::cout << validate::ServingValidationText(result);
  }
  return 0;
}

}  // namespace moelab::cli
