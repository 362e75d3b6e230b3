#include "loadgen/loadgen_report.h"

#include <cctype>
#include <cstdio>

namespace moelab::loadgen {
namespace {

std::string Printf(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char text[160];
  std::snprintf(text, sizeof text, format, a, b, c, d);
  return text;
}

std::string OrNone(const nlohmann::json& value, const char* unit) {
  return value.is_null() ? "none" : Printf("%.4g", value.get<double>()) + unit;
}

}  // namespace

nlohmann::json LoadgenJson(const LoadgenOptions& options, const serving::LoadSpec& load,
                           const serving::ServiceLevelObjectives& slo,
                           const LoadgenResult& result) {
  nlohmann::json json = serving::ServingSummaryToJson(serving::Summarize(result.outcomes, slo));
  const auto optional_number = [](const std::optional<double>& value) -> nlohmann::json {
    return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
  };
  json["source"] = "measured";
  json["url"] = options.completion.url.ToString();
  json["model"] = options.completion.model ? nlohmann::json(*options.completion.model)
                                           : nlohmann::json(nullptr);
  json["load"] = {{"arrivals", serving::Describe(load.arrivals)},
                  {"prompt_tokens", serving::Describe(load.prompt_tokens)},
                  {"output_tokens", serving::Describe(load.output_tokens)},
                  {"seed", load.seed},
                  {"requests", result.outcomes.size()},
                  {"duration_s", optional_number(load.duration_s)}};
  json["slo"] = {{"ttft_s", optional_number(slo.ttft_s)}, {"tpot_s", optional_number(slo.tpot_s)}};
  json["concurrency_max"] = options.concurrency_max;
  json["timeout_s"] = options.completion.timeout_s;
  json["late_sends"] = result.late_sends;
  json["max_send_lateness_s"] = result.max_send_lateness_s;
  json["wall_s"] = result.wall_s;
  return json;
}

std::string LoadgenText(const nlohmann::json& report) {
  const nlohmann::json& load = report["load"];
  std::string text = "moelab loadgen: " + std::to_string(load["requests"].get<int64_t>()) +
                     " requests to " + report["url"].get<std::string>() + ", arrivals " +
                     load["arrivals"].get<std::string>() + ", prompt tokens " +
                     load["prompt_tokens"].get<std::string>() + ", output tokens " +
                     load["output_tokens"].get<std::string>() + ", seed " +
                     std::to_string(load["seed"].get<uint64_t>()) + "\n";
  text += "completed " + std::to_string(report["completed"].get<int64_t>()) + ", failed " +
          std::to_string(report["failed"].get<int64_t>()) + "\n";
  for (const nlohmann::json& failure : report["failures"]) {
    text += "  " + std::to_string(failure["count"].get<int64_t>()) + " x " +
            failure["error"].get<std::string>() + "\n";
  }
  text += "           p50 ms    p90 ms    p99 ms   mean ms  samples\n";
  for (const char* measure : {"ttft_s", "tpot_s", "itl_s", "e2e_s"}) {
    const nlohmann::json& p = report[measure];
    std::string name(measure);
    name = name.substr(0, name.size() - 2);
    for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    text += name + std::string(6 - name.size(), ' ') +
            (p["p50"].is_null()  // no sample: null in the JSON
                 ? std::string("       n/a       n/a       n/a       n/a")
                 : Printf("%10.2f%10.2f%10.2f%10.2f", 1e3 * p["p50"].get<double>(),
                          1e3 * p["p90"].get<double>(), 1e3 * p["p99"].get<double>(),
                          1e3 * p["mean"].get<double>())) +
            "  " + std::to_string(p["count"].get<int64_t>()) + "\n";
  }
  text += Printf(
      "throughput %.2f tokens/s, %.3f requests/s; goodput %.3f requests/s; over %.2f s\n",
      report["throughput_tokens_per_s"].get<double>(), report["requests_per_s"].get<double>(),
      report["goodput_requests_per_s"].get<double>(), report["duration_s"].get<double>());
  text += "SLO: TTFT " + OrNone(report["slo"]["ttft_s"], " s") + ", TPOT " +
          OrNone(report["slo"]["tpot_s"], " s") + "\n";
  text +=
      "late sends " + std::to_string(report["late_sends"].get<int64_t>()) +
      Printf(" (largest send delay %.2f ms", 1e3 * report["max_send_lateness_s"].get<double>()) +
      "; --concurrency-max " + std::to_string(report["concurrency_max"].get<int64_t>()) + ")\n";
  return text;
}

}  // namespace moelab::loadgen
