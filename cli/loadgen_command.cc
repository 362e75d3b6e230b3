// moelab loadgen: open-loop load against an OpenAI-compatible server (loadgen/), measured in
// serving/'s moelab.serving/1.
#include <unistd.h>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/limits.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/serving_options.h"
#include "loadgen/load_generator.h"
#include "loadgen/loadgen_report.h"
#include "serving/load_spec.h"

namespace moelab::cli {
namespace {

constexpr const char* kUsage =
    "usage: moelab loadgen --url URL --arrivals poisson:RATE|gamma:RATE,CV|constant:RATE|"
    "trace:FILE (--requests N | --duration S) --prompt-tokens DIST --output-tokens DIST --seed S "
    "[--slo-ttft S] [--slo-tpot S] [--concurrency-max C] [--model NAME] [--timeout S] "
    "[--vocab V] [--ignore-eos] [--stream-usage] --json|--csv [--out FILE]\n"
    "DIST: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE (e.g. "
    "presets/workloads/sharegpt-like-lengths.csv)";

// A service-level objective in seconds: finite and above 0.
void CheckSlo(const std::optional<double>& seconds, const std::string& option) {
  if (seconds) SloSeconds(*seconds, option);
}

// Every request failed: there is nothing to measure, and a report of zeros would read as one.
// A refusal of every request (HTTP 400) is most often a prompt the server cannot take: its
// token ids (drawn below --vocab: told unless the server's message is about length) or its
// length (--prompt-tokens plus --output-tokens against the server's limit); the message says
// which options set them. Servers put the offending value in their message (moelab serve the
// token id), so many distinct errors each met once are said to be that, with one example.
void RequireACompletedRequest(const nlohmann::json& report, int64_t vocab) {
  if (report["completed"].get<int64_t>() > 0) return;
  const nlohmann::json& failures = report["failures"];
  std::string most;
  if (failures.empty()) {
    most = "most often: no request was sent";
  } else {
    const std::string first = failures[0]["error"].get<std::string>();
    const int64_t count = failures[0]["count"].get<int64_t>();
    most = count == 1 && failures.size() > 1
               ? std::to_string(failures.size()) + " distinct errors, each once, e.g.: " + first
               : "most often: " + first + " (" + std::to_string(count) + " of them)";
    if (first.rfind("http 400", 0) == 0) {
      const bool about_length = first.find("length") != std::string::npos ||
                                first.find("context") != std::string::npos ||
                                first.find("max_tokens") != std::string::npos;
      if (!about_length) {
        most += "; the prompts' token ids are drawn from 1.." + std::to_string(vocab - 1) +
                " (--vocab " + std::to_string(vocab) + ": at most the served model's vocabulary)";
      }
      most +=
          "; a request's length is --prompt-tokens plus --output-tokens (at most the "
          "server's max_model_len; llama-server's -c / -np)";
    }
  }
  throw base::Error("loadgen: no request completed; " +
                    std::to_string(report["failed"].get<int64_t>()) + " failed, " + most);
}

}  // namespace

int Loadgen(const std::vector<std::string>& args) {
  serving::LoadSpec load;
  serving::ServiceLevelObjectives slo;
  loadgen::LoadgenOptions options;
  std::string url;
  po::options_description described("moelab loadgen");
  // clang-format off
  described.add_options()
      ("url", po::value<std::string>(&url), "the server: http://HOST:PORT[/PREFIX]; requests go to PREFIX/v1/completions (required)")
      ("arrivals", po::value<std::string>()->notifier([&](const std::string& text) { load.arrivals = serving::ParseArrivals(text, "--arrivals"); }), "poisson:RATE | gamma:RATE,CV | constant:RATE (requests/s) | trace:FILE (CSV: arrival_s[,prompt_tokens][,output_tokens]) (required)")
      ("requests", po::value<int64_t>()->notifier([&](int64_t count) { load.requests = count; }), "requests to send (or --duration)")
      ("duration", NumberInto(&load.duration_s, "duration"), "send the requests arriving in the first S seconds (or --requests)")
      ("prompt-tokens", po::value<std::string>()->notifier([&](const std::string& text) { load.prompt_tokens = serving::ParseLengths(text, "--prompt-tokens"); }), "prompt length DIST: N | uniform:A,B | lognormal:MEAN,SIGMA | csv:FILE")
      ("output-tokens", po::value<std::string>()->notifier([&](const std::string& text) { load.output_tokens = serving::ParseLengths(text, "--output-tokens"); }), "output length DIST (max_tokens of each request)")
      ("seed", po::value<uint64_t>(&load.seed), "seed of the arrivals, the lengths and the prompts' token ids (required)")
      ("slo-ttft", NumberInto(&slo.ttft_s, "slo-ttft"), "TTFT objective in seconds (goodput)")
      ("slo-tpot", NumberInto(&slo.tpot_s, "slo-tpot"), "TPOT objective in seconds (goodput)")
      ("concurrency-max", Into(&options.concurrency_max), "requests in flight at most (worker threads); one due beyond it is sent late and counted in late_sends")
      ("model", po::value<std::string>()->notifier([&](const std::string& name) { options.completion.model = name; }), "the body's model name (vLLM: the served model's name; default: none sent)")
      ("timeout", Into(&options.completion.timeout_s), "seconds from a request's arrival to its end before it fails as a timeout")
      ("vocab", Into(&options.completion.vocab), "prompt token ids are drawn from 1..V-1 (at most the served model's vocabulary)")
      ("ignore-eos", po::bool_switch(&options.completion.ignore_eos), "send \"ignore_eos\": true so a model generates all max_tokens (vLLM, llama-server)")
      ("stream-usage", po::bool_switch(&options.completion.stream_usage), "send \"stream_options\": {\"include_usage\": true} so vLLM ends with its token count (exact when a chunk holds several tokens)");
  // clang-format on
  AddOutputOptions(described);
  po::variables_map values;
  if (!ParseOptions(kUsage, described, args, values)) return 0;
  for (const char* required : {"url", "arrivals", "seed"}) {
    if (!values.count(required))
      throw base::Error(std::string("--") + required + " is required (see --help)");
  }
  const OutputRequest output = OutputRequestFrom(values);
  options.completion.url = loadgen::ParseServerUrl(url, "--url");
  options.completion.seed = load.seed;
  options.progress = isatty(STDERR_FILENO) == 1;
  options.Validate();
  CheckSlo(slo.ttft_s, "--slo-ttft");
  CheckSlo(slo.tpot_s, "--slo-tpot");
  serving::CheckLengthSources(load, values.count("prompt-tokens") > 0,
                              values.count("output-tokens") > 0);
  const std::vector<serving::RequestSpec> requests = serving::GenerateRequests(load);
  const loadgen::LoadgenResult result = loadgen::RunLoad(options, requests);
  nlohmann::json report = loadgen::LoadgenJson(options, load, slo, result);
  RequireACompletedRequest(report, options.completion.vocab);
  report["provenance"] = Provenance();
  EmitResult(output, report, loadgen::LoadgenText(report));
  return 0;
}

}  // namespace moelab::cli
