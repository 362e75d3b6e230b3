// moelab.validation_serving/1, the text summary and report.md of validate --cases serving.
#include <sstream>

#include "base/stats.h"
#include "report/format.h"
#include "validate/serving_validation.h"

namespace moelab::validate {
namespace {

nlohmann::json OptionalNumber(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json SaturationJson(const Saturation& s) {
  return {{"requests_per_s", s.requests_per_s}, {"tokens_per_s", s.tokens_per_s}};
}

std::string Percent(double fraction) { return report::FormatNumber(100 * fraction, 3) + " %"; }

}  // namespace

nlohmann::json ServingValidationToJson(const ServingValidationResult& result) {
  const ServingValidationRequest& request = result.request;
  nlohmann::json json;
  json["schema"] = "moelab.validation_serving/1";
  json["machine"] = result.machine;
  json["model"] = {{"name", request.model}, {"profiled", result.model_shape}};
  json["scheduler"] = request.scheduler.ToJson();
  json["load"] = {{"arrivals", "poisson"},
                  {"requests", request.requests},
                  {"prompt_tokens", serving::Describe(request.prompt_tokens)},
                  {"output_tokens", serving::Describe(request.output_tokens)},
                  {"seed", request.seed}};
  json["quick"] = request.quick;
  json["repeats"] = request.repeat;
  json["engine_iteration"] = {{"scale", result.engine_iteration_scale},
                              {"residual_s", result.engine_iteration_residual_s},
                              {"iterations", result.engine_iterations},
                              {"requests", kMinServingRequests}};
  json["client_latency_s"] = result.client_latency_s;
  nlohmann::json measured_saturation = nlohmann::json::array();
  std::vector<double> saturation_rps, saturation_tps;
  for (const Saturation& s : result.measured_saturation_runs) {
    measured_saturation.push_back(SaturationJson(s));
    saturation_rps.push_back(s.requests_per_s);
    saturation_tps.push_back(s.tokens_per_s);
  }
  json["saturation"] = {{"predicted", SaturationJson(result.predicted_saturation)},
                        {"measured",
                         {{"requests_per_s", base::Median(saturation_rps)},
                          {"tokens_per_s", base::Median(saturation_tps)}}},
                        {"measured_runs", measured_saturation},
                        {"method", "every request at t = 0, predicted and measured"}};
  nlohmann::json rates = nlohmann::json::array();
  for (const ServingRate& rate : result.rates) {
    nlohmann::json runs = nlohmann::json::array();
    for (const ServingRun& run : rate.runs) {
      runs.push_back({{"round", run.round + 1},
                      {"late_sends", run.late_sends},
                      {"measured", serving::ServingSummaryToJson(run.measured)},
                      {"predicted", serving::ServingSummaryToJson(run.predicted)}});
    }
    rates.push_back({{"fraction_of_predicted_saturation", rate.fraction},
                     {"rate_per_s", rate.rate_per_s},
                     {"runs", runs},
                     {"errors", rate.errors}});
  }
  json["rates"] = rates;
  json["below_saturation_median_abs_error"] = result.below_saturation_median_abs_error;
  json["slo"] = {{"ttft_p99_s", result.slo_ttft_p99_s},
                 {"predicted_crossing_per_s", OptionalNumber(result.predicted_crossing_per_s)},
                 {"measured_crossing_per_s", OptionalNumber(result.measured_crossing_per_s)}};
  json["serving_overhead"] = {{"batch", result.overhead.batch},
                              {"prompt_tokens", 8},
                              {"output_tokens", request.overhead_output_tokens},
                              {"server_tokens_per_s", result.overhead.server_tokens_per_s},
                              {"run_tokens_per_s", result.overhead.run_tokens_per_s},
                              {"ratio", result.overhead.ratio()}};
  nlohmann::json targets = nlohmann::json::array();
  for (const ServingTarget& target : result.targets) targets.push_back(target.ToJson());
  json["targets"] = targets;
  json["notes"] = result.notes;
  json["load_average_1m"] = {{"start", result.load_average_1m_start},
                             {"end", result.load_average_1m_end}};
  json["profile_reused"] = result.profile_reused;
  json["wall_time_s"] = result.wall_time_s;
  return json;
}

std::string ServingValidationText(const ServingValidationResult& result) {
  std::ostringstream out;
  out << "validate --cases serving: " << result.request.requests << " requests a run, "
      << result.request.repeat << " rounds; engine iteration scale "
      << report::FormatNumber(result.engine_iteration_scale, 4) << " (residual "
      << report::FormatNumber(result.engine_iteration_residual_s * 1e3, 3)
      << " ms), client latency " << report::FormatNumber(result.client_latency_s * 1e3, 3)
      << " ms\n";
  for (const ServingRate& rate : result.rates) {
    out << "  rate " << report::FormatNumber(rate.rate_per_s, 4) << "/s (" << Percent(rate.fraction)
        << " of predicted saturation):";
    for (const std::string& metric : ServingMetricNames()) {
      const nlohmann::json& e = rate.errors.at(metric);
      out << " " << metric << " " << Percent(e["abs_error"].get<double>()) << " (spread "
          << Percent(e["measured_spread"].get<double>()) << ")";
    }
    out << "\n";
  }
  std::vector<double> measured;
  for (const Saturation& s : result.measured_saturation_runs) measured.push_back(s.requests_per_s);
  out << "  saturation: predicted "
      << report::FormatNumber(result.predicted_saturation.requests_per_s, 4)
      << " requests/s, measured " << report::FormatNumber(base::Median(measured), 4) << "\n";
  out << "  p99 TTFT SLO " << report::FormatNumber(result.slo_ttft_p99_s, 4)
      << " s crossed at: predicted "
      << (result.predicted_crossing_per_s
              ? report::FormatNumber(*result.predicted_crossing_per_s, 4)
              : std::string("-"))
      << "/s, measured "
      << (result.measured_crossing_per_s ? report::FormatNumber(*result.measured_crossing_per_s, 4)
                                         : std::string("-"))
      << "/s\n";
  out << "  serving overhead at batch " << result.overhead.batch << ": server / run decode "
      << report::FormatNumber(result.overhead.ratio(), 4) << "\n";
  for (const ServingTarget& target : result.targets) {
    out << "  target " << target.name << (target.at_least ? " >= " : " <= ")
        << report::FormatNumber(target.limit, 3) << ": "
        << (target.value ? report::FormatNumber(*target.value, 4) : target.why_missing) << " "
        << (target.pass() ? "PASS" : "FAIL") << "\n";
  }
  out << "  load average " << report::FormatNumber(result.load_average_1m_start, 3) << " -> "
      << report::FormatNumber(result.load_average_1m_end, 3) << "\n";
  return out.str();
}

std::string ServingValidationMarkdown(const ServingValidationResult& result) {
  std::ostringstream out;
  out << "# validate --cases serving\n\n```\n" << ServingValidationText(result) << "```\n\n";
  out << "| rate/s | metric | measured | predicted | abs error | spread "
         "|\n|---|---|---|---|---|---|\n";
  for (const ServingRate& rate : result.rates) {
    for (const std::string& metric : ServingMetricNames()) {
      const nlohmann::json& e = rate.errors.at(metric);
      out << "| " << report::FormatNumber(rate.rate_per_s, 4) << " | " << metric << " | "
          << report::FormatNumber(e["measured"].get<double>(), 4) << " | "
          << report::FormatNumber(e["predicted"].get<double>(), 4) << " | "
          << Percent(e["abs_error"].get<double>()) << " | "
          << Percent(e["measured_spread"].get<double>()) << " |\n";
    }
  }
  out << "\n## Notes\n\n";
  for (const std::string& note : result.notes) out << "- " << note << "\n";
  return out.str();
}

}  // namespace moelab::validate
